//! Following a run folder's log as it grows, for `runner logs --follow` and the page's stream.

use std::io::{Read, Seek, SeekFrom};

use engine::Record;

use crate::home::RunDir;

/// Reads the complete lines appended to a log since the last read, each checked against its
/// checksum as a load checks it. A torn last line is left
/// in the file and read again next time: it is taken once its end is written, and if the next
/// process to open the log cuts it and writes another line in its place, that line is read.
#[derive(Debug, Default)]
pub struct Tail {
    /// Where the last complete line read ends.
    offset: u64,
    line: usize,
}

impl Tail {
    /// The records whose lines were completed since the last call.
    pub fn read(&mut self, run: &RunDir) -> anyhow::Result<Vec<Record>> {
        let path = run.log();
        let mut file =
            std::fs::File::open(&path).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |end| end + 1);
        let mut records = Vec::new();
        for text in bytes[..complete].split_inclusive(|&b| b == b'\n') {
            self.line += 1;
            let record = engine::store::record_of_line(text)
                .map_err(|why| anyhow::anyhow!("{}:{}: {why}", path.display(), self.line))?;
            records.push(record);
        }
        self.offset += complete as u64;
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn line(seq: u64) -> String {
        let event = engine::Event::RetryDue { task: format!("t{seq}") };
        let record = Record { seq, at: "2026-11-22T12:45:03.123Z".into(), run_id: "r".into(), event };
        format!("{}\n", serde_json::to_string(&record).expect("a record serialises"))
    }

    fn seqs(tail: &mut Tail, run: &RunDir) -> Vec<u64> {
        tail.read(run).expect("the log reads").iter().map(|r| r.seq).collect()
    }

    #[test]
    fn a_torn_line_waits_for_its_end_and_is_read_again_after_the_next_writer_cuts_it() {
        let folder = tempfile::tempdir().expect("a folder");
        let run = RunDir { id: "r".to_owned(), dir: folder.path().to_path_buf() };
        let (first, second) = (line(1), line(2));
        std::fs::write(run.log(), format!("{first}{}", &second[..10])).expect("written");
        let mut tail = Tail::default();
        assert_eq!(seqs(&mut tail, &run), [1], "the torn line is not read");
        assert_eq!(seqs(&mut tail, &run), Vec::<u64>::new());

        // The next process to open the log cuts the torn line, then writes whole ones; the
        // line it writes in its place differs from the torn one.
        let file = std::fs::OpenOptions::new().append(true).open(run.log()).expect("opens");
        file.set_len(first.len() as u64).expect("cut");
        (&file).write_all(format!("{}{}", line(7), line(8)).as_bytes()).expect("appended");
        assert_eq!(seqs(&mut tail, &run), [7, 8], "each record once, none from the cut bytes");
    }

    #[test]
    fn a_line_appended_with_a_wrong_checksum_is_refused_naming_its_line() {
        let folder = tempfile::tempdir().expect("a folder");
        let run = RunDir { id: "r".to_owned(), dir: folder.path().to_path_buf() };
        let store = engine::store::JsonlStore::create(&run.log()).expect("a log");
        let record = |seq| {
            let event = engine::Event::RetryDue { task: format!("t{seq}") };
            Record { seq, at: "2026-11-22T12:45:03.123Z".into(), run_id: "r".into(), event }
        };
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
        runtime.block_on(engine::store::EventStore::append(&store, vec![record(1), record(2)])).expect("written");
        let mut tail = Tail::default();
        assert_eq!(seqs(&mut tail, &run), [1, 2], "sealed lines read");
        runtime.block_on(engine::store::EventStore::append(&store, vec![record(3)])).expect("written");
        let text = std::fs::read_to_string(run.log()).expect("the log");
        std::fs::write(run.log(), text.replace("\"task\":\"t3\"", "\"task\":\"t4\"")).expect("changed");
        let error = tail.read(&run).expect_err("a changed line is refused").to_string();
        assert!(error.contains(":3: checksum mismatch"), "{error}");
    }
}
