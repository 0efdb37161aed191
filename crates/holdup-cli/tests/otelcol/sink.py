"""An OTLP/HTTP profiles receiver for the agent's test, behind the
Collector: it decodes each request with the official protos
(opentelemetry-proto), resolves the string references the Collector
makes of resource attributes, and appends one JSON line per request to a
file, with when it arrived. Listens on 127.0.0.1:PORT. Usage: sink.py PORT FILE"""
import gzip
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc


def value(v, strings):
    kind = v.WhichOneof("value")
    if kind == "string_value_strindex":
        return strings[v.string_value_strindex]
    if kind == "int_value":
        return v.int_value
    if kind == "string_value":
        return v.string_value
    if kind == "double_value":
        return v.double_value
    raise ValueError(f"unexpected attribute value {kind}")


def summary(req):
    """Per resource: its attributes, and per profile its types and samples
    with their attributes, values and stack depth. Every index is checked."""
    d = req.dictionary
    strings = list(d.string_table)
    assert strings[0] == ""
    for table in (d.mapping_table, d.location_table, d.function_table,
                  d.attribute_table, d.stack_table, d.link_table):
        assert len(table) >= 1, "tables begin with their empty element"

    def attrs_of(indices):
        out = {}
        for i in indices:
            a = d.attribute_table[i]
            out[strings[a.key_strindex]] = value(a.value, strings)
        return out

    out = []
    for rp in req.resource_profiles:
        attrs = {}
        for kv in rp.resource.attributes:
            key = strings[kv.key_strindex] if kv.key_strindex else kv.key
            attrs[key] = value(kv.value, strings)
        profiles = []
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                samples = []
                for s in p.samples:
                    sa = attrs_of(s.attribute_indices)
                    stack = d.stack_table[s.stack_index]
                    funcs = []
                    for li in stack.location_indices:
                        loc = d.location_table[li]
                        assert loc.mapping_index < len(d.mapping_table)
                        funcs.append("+".join(strings[d.function_table[l.function_index].name_strindex]
                                              for l in loc.lines))
                    samples.append({"attrs": sa, "values": list(s.values), "stack": funcs})
                profiles.append({
                    "scope": sp.scope.name,
                    "sample_type": strings[p.sample_type.type_strindex],
                    "unit": strings[p.sample_type.unit_strindex],
                    "period": p.period,
                    "time_unix_nano": p.time_unix_nano,
                    "duration_nano": p.duration_nano,
                    "samples": samples,
                    "attrs": attrs_of(p.attribute_indices),
                })
        out.append({"attrs": attrs, "profiles": profiles})
    return out


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        req = svc.ExportProfilesServiceRequest.FromString(body)
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps({"path": self.path, "received_unix_ns": time.time_ns(),
                                "resources": summary(req)}) + "\n")
        out = svc.ExportProfilesServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
