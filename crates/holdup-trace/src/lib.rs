//! The `holdup.data` trace format: what a recording holds, and how it is
//! written and read. No libbpf here: analyses and their tests need only this.

pub mod codec;
pub mod devices;
pub mod file;
pub mod flight;
pub mod fxhash;
pub mod latency;
pub mod model;
pub mod output;
pub mod record;
pub mod symfile;
#[cfg(feature = "synth")]
pub mod synth;

pub use file::{features, Damage, Error, Header, Reader, Writer};
pub use model::{Filling, Thread, Trace};
pub use output::{create_private, open_private};
pub use record::*;

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_records() -> Vec<Record> {
        vec![
            Record::Comm {
                time: 1_000,
                pid: 10,
                tid: 11,
                comm: "worker".into(),
            },
            Record::Dso(Dso {
                id: 1,
                path: "/usr/bin/app".into(),
                build_id: Some(vec![1, 2, 3]),
            }),
            Record::Stack(Stack {
                id: 1,
                frames: vec![
                    Frame {
                        dso: KERNEL_DSO,
                        addr: 0xffff_ffff_8123_4567,
                    },
                    Frame {
                        dso: 1,
                        addr: 0x1234,
                    },
                    Frame {
                        dso: UNKNOWN_DSO,
                        addr: 0x7fff_0000,
                    },
                ],
            }),
            Record::Sample(Sample {
                time: 5_000_000,
                wake: 0,
                end: 5_000_000,
                pid: 10,
                tid: 11,
                cpu: 1,
                class: Class::Cpu,
                weight: 1,
                sched_weight: 0,
                waker: Waker::None,
                stack: 1,
                late_user_stack: false,
                waker_stack: 0,
            }),
            // Steal time rides on an on-CPU sample.
            Record::Sample(Sample {
                time: 6_000_000,
                wake: 0,
                end: 6_000_000,
                pid: 10,
                tid: 11,
                cpu: 1,
                class: Class::Cpu,
                weight: 2,
                sched_weight: 3,
                waker: Waker::None,
                stack: 1,
                late_user_stack: true,
                waker_stack: 0,
            }),
            Record::Sample(Sample {
                time: 4_000_000,
                wake: 9_000_000,
                end: 9_500_000,
                pid: 10,
                tid: 11,
                cpu: 0,
                class: Class::Io,
                weight: 5,
                sched_weight: 1,
                waker: Waker::Irq(24),
                stack: 1,
                late_user_stack: true,
                waker_stack: 0,
            }),
            // A wait a thread ended, with that thread's stack at the wakeup.
            Record::Sample(Sample {
                time: 9_500_000,
                wake: 12_000_000,
                end: 12_500_000,
                pid: 10,
                tid: 11,
                cpu: 0,
                class: Class::Lock,
                weight: 2,
                sched_weight: 1,
                waker: Waker::Thread(12),
                stack: 1,
                late_user_stack: false,
                waker_stack: 1,
            }),
            Record::Segment(Segment {
                pid: 10,
                tid: 11,
                start: 4_000_000,
                wake: 4_000_000,
                end: 9_500_000,
                class: Class::Lock,
                waker: Waker::Thread(12),
                cpu: Some(1),
            }),
            Record::Segment(Segment {
                pid: 10,
                tid: 12,
                start: 8_000_000,
                wake: 0,
                end: 9_000_000,
                class: Class::Sched,
                waker: Waker::None,
                cpu: None,
            }),
            Record::Symbol(Symbol {
                frame: Frame {
                    dso: 1,
                    addr: 0x1234,
                },
                frames: vec![
                    SymFrame {
                        function: "inner".into(),
                        file: Some("a.c".into()),
                        line: 7,
                    },
                    SymFrame {
                        function: "outer".into(),
                        file: None,
                        line: 0,
                    },
                ],
            }),
            Record::BioIssue(Bio {
                time: 4_100_000,
                dev: 254 << 20,
                sector: 2048,
                bytes: 4096,
                op: BioOp::Read,
                pid: 10,
                tid: 11,
                tracked: true,
                error: 0,
            }),
            Record::Lost(Lost {
                what: "samples".into(),
                count: 3,
            }),
            Record::IrqName {
                irq: 24,
                name: "virtio1-req.0".into(),
            },
            Record::Note("process 10 ran generated code that nothing names".into()),
            // A goroutine readied by another, waiting on a socket, and one
            // no wakeup was seen for (the poller made it runnable).
            Record::GoWait(GoWait {
                time: 9_100_000,
                wake: 9_400_000,
                end: 9_450_000,
                pid: 10,
                tid: 12,
                goid: 7,
                reason: "IO wait".into(),
                weight: 3,
                sched_weight: 1,
                waker_goid: 9,
                waker_tid: 11,
                stack: 1,
                waited_on: Some("socket:[1234]".into()),
            }),
            Record::GoWait(GoWait {
                time: 9_200_000,
                wake: 0,
                end: 9_300_000,
                pid: 10,
                tid: 12,
                goid: 8,
                reason: "sync.Mutex.Lock".into(),
                weight: 1,
                sched_weight: 0,
                waker_goid: 0,
                waker_tid: 0,
                stack: 0,
                waited_on: None,
            }),
            Record::SyscallConfig(SyscallConfig {
                keep_ns: 1_000_000,
                sample_every: 64,
            }),
            Record::Syscall(Syscall {
                time: 9_600_000,
                end: 9_900_000,
                pid: 10,
                tid: 11,
                nr: 257,
                blocked: [200_000, 0, 1_000, 0],
                sleeps: 1,
                min_flt: 3,
                maj_flt: 1,
                waker: Waker::Irq(24),
                stack: 1,
                sampled: false,
            }),
            Record::SyscallTotals(SyscallTotals {
                pid: 10,
                nr: 257,
                count: 1000,
                total_ns: 12_345_678,
                blocked: [200_000, 0, 1_000, 5],
                min_flt: 3,
                maj_flt: 1,
                hist: vec![0, 0, 0, 7, 993],
            }),
            Record::Exit {
                time: 10_000_000,
                pid: 10,
                tid: 11,
            },
            Record::Finish(Finish {
                time: 10_000_001,
                exit_code: Some(-2),
            }),
        ]
    }

    fn header() -> Header {
        Header {
            period_ns: 1_000_000,
            start_ns: 1_000,
            ..Default::default()
        }
    }

    fn write_trace(records: &[Record], chunk_every: usize) -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), &header(), features::SEGMENTS).unwrap();
        for (i, r) in records.iter().enumerate() {
            w.write(r).unwrap();
            if (i + 1) % chunk_every == 0 {
                w.flush_chunk().unwrap();
            }
        }
        w.finish().unwrap()
    }

    fn read_all(bytes: &[u8]) -> Result<(Vec<Record>, Option<Damage>), Error> {
        let mut r = Reader::new(bytes, "test")?;
        let mut out = Vec::new();
        r.for_each(|rec| out.push(rec)).unwrap();
        Ok((out, r.damage().cloned()))
    }

    #[test]
    fn every_record_round_trips() {
        let records = sample_records();
        let bytes = write_trace(&records, 4);
        let (back, damage) = read_all(&bytes).unwrap();
        assert_eq!(back, records);
        assert_eq!(damage, None);
    }

    #[test]
    fn the_writer_counts_records_and_bytes_by_kind() {
        let records = sample_records();
        let mut w = Writer::new(Vec::new(), &header(), 0).unwrap();
        for r in &records {
            w.write(r).unwrap();
        }
        let stats: Vec<_> = w.stats().collect();
        let kinds: Vec<_> = stats.iter().map(|s| s.0).collect();
        let mut sorted = kinds.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(kinds, sorted, "one line per kind, by name");
        for (kind, n, _) in &stats {
            let expected = records.iter().filter(|r| r.kind() == *kind).count();
            assert_eq!(*n as usize, expected, "{kind}");
        }
        let bytes: u64 = stats.iter().map(|s| s.2).sum();
        let file = w.finish().unwrap();
        // The file holds the header, one chunk header and the records.
        assert!(bytes > 0 && (bytes as usize) < file.len());
    }

    #[test]
    fn a_cut_at_any_byte_keeps_every_complete_chunk() {
        let records = sample_records();
        let bytes = write_trace(&records, 3);
        for cut in 0..bytes.len() {
            match read_all(&bytes[..cut]) {
                Err(Error::NotATrace { .. }) => assert!(cut < 8),
                Err(Error::Header { .. }) => {}
                Err(e) => panic!("cut at {cut}: unexpected {e}"),
                Ok((back, damage)) => {
                    // A prefix of the records, in whole chunks of 3.
                    assert!(back.len() % 3 == 0 || back.len() == records.len());
                    assert_eq!(&records[..back.len()], &back[..]);
                    if back.len() < records.len() {
                        assert!(matches!(damage, Some(Damage::Truncated { .. }) | None));
                    }
                }
            }
        }
    }

    #[test]
    fn garbage_is_not_a_trace_and_flipped_bytes_are_caught() {
        assert!(matches!(
            read_all(b"garbage garbage garbage"),
            Err(Error::NotATrace { .. })
        ));
        assert!(matches!(read_all(b""), Err(Error::NotATrace { .. })));
        let records = sample_records();
        let bytes = write_trace(&records, 100);
        // Flip each byte after the header in turn: never a panic, never a
        // silently wrong record.
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x55;
            if let Ok((back, damage)) = read_all(&b) {
                if damage.is_none() {
                    assert_eq!(back, records, "flip at {i} changed records silently");
                }
            }
        }
    }

    #[test]
    fn newer_major_version_is_refused() {
        let mut bytes = write_trace(&sample_records(), 100);
        bytes[8] = 9;
        let err = read_all(&bytes).unwrap_err();
        assert!(err.to_string().contains("newer"), "{err}");
    }

    #[test]
    fn model_indexes_threads_and_lifetimes() {
        let bytes = write_trace(&sample_records(), 5);
        let mut reader = Reader::new(&bytes[..], "t").unwrap();
        let t = Trace::read(&mut reader).unwrap();
        let th = &t.threads[&11];
        assert_eq!(th.comm, "worker");
        assert_eq!((th.start, th.end), (1_000, 10_000_000));
        assert_eq!(t.end_ns, 10_000_001);
        assert_eq!(t.lost_total(), 3);
        assert_eq!(t.waker_name(Waker::Irq(24)), "irq:virtio1-req.0");
        assert_eq!(t.waker_name(Waker::Softirq(4)), "softirq:block");
        assert_eq!(t.dso_name(1), "app");
        assert_eq!(t.stack(1).len(), 3);
        // Thread 12 was only seen in a segment: it is not invented.
        assert!(!t.threads.contains_key(&12));
    }

    /// Filling skips the search of the threads for a sample of a thread
    /// it has seen: the trace is still the one adding each record gives,
    /// for threads named before their samples, after, or never, created
    /// or exited in between.
    #[test]
    fn filling_gives_the_trace_of_adding_each_record() {
        let mut records = Vec::new();
        for r in sample_records().into_iter().chain(sample_records()) {
            if let Record::Sample(s) = &r {
                records.push(Record::Sample(Sample {
                    tid: 20,
                    ..s.clone()
                }));
            }
            records.push(r);
        }
        records.insert(
            1,
            Record::Fork {
                time: 500,
                parent_pid: 10,
                parent_tid: 20,
                pid: 10,
                tid: 21,
            },
        );
        let h = header();
        let mut filling = Filling::new(&h, 0);
        let mut added = Trace {
            header: h,
            ..Trace::default()
        };
        for r in records {
            filling.add(r.clone());
            added.add(r);
        }
        let filled = filling.so_far();
        assert_eq!(filled.samples, added.samples);
        assert_eq!(filled.threads, added.threads);
        assert_eq!(
            filled.samples.len(),
            4 * sample_records()
                .iter()
                .filter(|r| matches!(r, Record::Sample(_)))
                .count()
        );
        assert!(filled.threads.contains_key(&20) && filled.threads.contains_key(&21));
    }

    #[test]
    fn segment_encoding_is_compact() {
        let mut enc = codec::Encoder::new();
        let mut t = 1_000_000_000_000u64;
        let n = 1000;
        for i in 0..n {
            let r = Record::Segment(Segment {
                pid: 4242,
                tid: 4243 + (i % 8),
                start: t,
                wake: t + 20_000,
                end: t + 23_000,
                class: Class::Other,
                waker: Waker::Thread(4243 + ((i + 1) % 8)),
                cpu: Some((i % 2) as u16),
            });
            enc.record(&r);
            t += 30_000;
        }
        let per = enc.buf.len() as f64 / n as f64;
        assert!(per <= 24.0, "{per} bytes per segment");
    }

    #[test]
    fn trace_files_are_created_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = holdup_testkit::scratch("trace-mode");
        let path = dir.join("t.data");
        // A file left with a wider mode is narrowed when it is rewritten.
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let header = Header {
            command: vec!["x".into()],
            ..Default::default()
        };
        Writer::create(&path, &header, 0).unwrap().finish().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        std::fs::remove_file(&path).unwrap();
        Writer::create(&path, &header, 0).unwrap().finish().unwrap();
        let fresh = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!((mode, fresh), (0o600, 0o600));
    }
}
