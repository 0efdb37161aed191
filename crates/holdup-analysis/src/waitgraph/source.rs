//! Where the records come from. The analysis reads them twice, in file
//! order, in batches; it never holds more than a few batches.

use super::Error;
use holdup_trace::{Damage, Filling, Header, Reader, Record, Sample, Segment, Trace};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// A record as a pass reads it, borrowed from wherever the source keeps
/// it: samples and segments (nearly all of a trace) need not sit in
/// records, so a trace already in memory hands them over as they are.
#[derive(Clone, Copy, Debug)]
pub enum Item<'a> {
    Sample(&'a Sample),
    Segment(&'a Segment),
    /// Any other record.
    Other(&'a Record),
}

impl<'a> Item<'a> {
    pub fn of(r: &'a Record) -> Item<'a> {
        match r {
            Record::Sample(s) => Item::Sample(s),
            Record::Segment(s) => Item::Segment(s),
            r => Item::Other(r),
        }
    }
}

/// Hand the records of `records` to `f` as items, in batches.
fn by_items(records: &[Record], f: &mut dyn FnMut(&[Item<'_>])) {
    let mut items = Vec::with_capacity(BATCH.min(records.len()));
    for batch in records.chunks(BATCH) {
        items.clear();
        items.extend(batch.iter().map(Item::of));
        f(&items);
    }
}

pub trait Source {
    fn header(&self) -> &Header;
    /// Feature bits of the recording (`holdup_trace::features`).
    fn features(&self) -> u32;
    /// Hand every record to `f`, in file order, in batches. Called once per
    /// pass.
    fn pass(&mut self, f: &mut dyn FnMut(&[Item<'_>])) -> Result<(), Error>;
    /// Why the last pass stopped before the end of the data, if it did.
    fn damage(&self) -> Option<&Damage> {
        None
    }
    /// Time spent so far handing batches to `f` and in `f` (the analysis
    /// proper, without reading and decoding), if measured.
    fn analysis_time(&self) -> Option<std::time::Duration> {
        None
    }
}

/// Records already in memory (tests, small tools).
pub struct InMemory<'a> {
    pub header: Header,
    pub features: u32,
    pub records: &'a [Record],
}

impl Source for InMemory<'_> {
    fn header(&self) -> &Header {
        &self.header
    }
    fn features(&self) -> u32 {
        self.features
    }
    fn pass(&mut self, f: &mut dyn FnMut(&[Item<'_>])) -> Result<(), Error> {
        by_items(self.records, f);
        Ok(())
    }
}

/// A trace file, decoded on a second thread while the first analyses.
pub struct TraceFile {
    path: PathBuf,
    header: Header,
    features: u32,
    damage: Option<Damage>,
    busy: std::time::Duration,
}

impl TraceFile {
    pub fn open(path: &Path) -> Result<Self, Error> {
        let r = Reader::open(path)?;
        Ok(TraceFile {
            path: path.to_path_buf(),
            header: r.header.clone(),
            features: r.features,
            damage: None,
            busy: Default::default(),
        })
    }
}

impl Source for TraceFile {
    fn header(&self) -> &Header {
        &self.header
    }
    fn features(&self) -> u32 {
        self.features
    }
    fn damage(&self) -> Option<&Damage> {
        self.damage.as_ref()
    }

    fn analysis_time(&self) -> Option<std::time::Duration> {
        Some(self.busy)
    }

    fn pass(&mut self, f: &mut dyn FnMut(&[Item<'_>])) -> Result<(), Error> {
        let path = self.path.clone();
        let io_err = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let mut reader = Reader::open(&self.path)?;
        // Batches go over `full` and come back over `empty` to be reused.
        let (full_tx, full_rx) = mpsc::sync_channel::<Vec<Record>>(2);
        let (empty_tx, empty_rx) = mpsc::channel::<Vec<Record>>();
        let result = std::thread::scope(|s| {
            let decoder = s.spawn(move || -> std::io::Result<Option<Damage>> {
                loop {
                    let mut batch = empty_rx.try_recv().unwrap_or_default();
                    if !reader.next_chunk(&mut batch)? {
                        return Ok(reader.damage().cloned());
                    }
                    if full_tx.send(batch).is_err() {
                        return Ok(None);
                    }
                }
            });
            for batch in full_rx.iter() {
                let t = std::time::Instant::now();
                by_items(&batch, f);
                self.busy += t.elapsed();
                let _ = empty_tx.send(batch);
            }
            decoder.join().expect("decoder thread panicked")
        });
        self.damage = result.map_err(io_err)?;
        Ok(())
    }
}

/// A trace file decoded once, for when the trace is wanted whole after the
/// graph (what the waited-for side did): the first pass decodes it, each
/// chunk's records read by the pass while the cache still holds them, and
/// then moved into the trace; the second pass reads the trace's samples
/// and segments where they lie, in the file's order, instead of decoding
/// the file again or making records of them again. Memory grows with the
/// trace, as the whole trace's does.
pub struct Decoded {
    header: Header,
    features: u32,
    path: PathBuf,
    /// The file, until the first pass has decoded it.
    reader: Option<Reader<BufReader<File>>>,
    trace: Filling,
    /// What each record was, in file order: where a pass takes it from.
    order: Vec<Kind>,
    /// The records that are neither samples nor segments (few), in file
    /// order: the trace keeps them in forms the passes do not read.
    others: Vec<Record>,
    damage: Option<Damage>,
}

#[derive(Clone, Copy)]
enum Kind {
    Sample,
    Segment,
    Other,
}

/// Records handed to a pass at a time: few enough to stay in the cache
/// between being made and being read.
const BATCH: usize = 256;

impl Decoded {
    /// Open the file (its header is read); the first pass decodes the rest.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let reader = Reader::open(path)?;
        Ok(Decoded {
            header: reader.header.clone(),
            features: reader.features,
            path: path.to_path_buf(),
            trace: Filling::new(&reader.header, reader.features),
            reader: Some(reader),
            order: Vec::new(),
            others: Vec::new(),
            damage: None,
        })
    }

    /// Decode the file into the trace, each chunk's records handed to `f`
    /// first. Does nothing once done.
    fn decode(&mut self, f: &mut dyn FnMut(&[Item<'_>])) -> Result<(), Error> {
        let Some(mut reader) = self.reader.take() else {
            return Ok(());
        };
        let mut chunk = Vec::new();
        while reader.next_chunk(&mut chunk).map_err(|source| Error::Io {
            path: self.path.display().to_string(),
            source,
        })? {
            by_items(&chunk, f);
            self.order.reserve(chunk.len());
            for r in chunk.drain(..) {
                self.order.push(match r {
                    Record::Sample(_) => Kind::Sample,
                    Record::Segment(_) => Kind::Segment,
                    _ => {
                        self.others.push(r.clone());
                        Kind::Other
                    }
                });
                self.trace.add(r);
            }
        }
        self.damage = reader.damage().cloned();
        Ok(())
    }

    /// The whole trace, as `Trace::load` would have read it.
    pub fn into_trace(mut self) -> Result<Trace, Error> {
        self.decode(&mut |_| {})?;
        Ok(self.trace.finish(self.damage))
    }
}

impl Source for Decoded {
    fn header(&self) -> &Header {
        &self.header
    }
    fn features(&self) -> u32 {
        self.features
    }
    fn damage(&self) -> Option<&Damage> {
        self.damage.as_ref()
    }
    fn pass(&mut self, f: &mut dyn FnMut(&[Item<'_>])) -> Result<(), Error> {
        if self.reader.is_some() {
            return self.decode(f);
        }
        let t = self.trace.so_far();
        let mut samples = t.samples.iter();
        let mut segments = t.segments.iter();
        let mut others = self.others.iter();
        let mut batch = Vec::with_capacity(BATCH);
        for kind in &self.order {
            // Each is there: the trace took every sample and segment read.
            let item = match kind {
                Kind::Sample => samples.next().map(Item::Sample),
                Kind::Segment => segments.next().map(Item::Segment),
                Kind::Other => others.next().map(Item::Other),
            };
            batch.extend(item);
            if batch.len() == BATCH {
                f(&batch);
                batch.clear();
            }
        }
        if !batch.is_empty() {
            f(&batch);
        }
        Ok(())
    }
}
