//! `requests.jsonl`: a serve worker's requests, one line per batch.
//!
//! A line per batch rather than per request: every request of a batch shares its dispatch and
//! completion, so a line carries them once and then only each request's scheduled arrival
//! (about 20 bytes a request instead of about 100). Requests never dispatched follow, at most
//! 1024 to a line, with no batch, dispatch or completion. Requests are numbered in arrival
//! order; a line names its first, so a lost or repeated line is caught.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::SchemaError;
use crate::read::JsonLines;

/// The most requests one line may hold (the batcher's largest batch, and the chunk of queued
/// requests).
pub const MAX_REQUESTS_PER_LINE: usize = 1024;

/// One line of `requests.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestBatchRecord {
    /// 0-based batch index; null for requests never dispatched.
    pub batch: Option<u64>,
    /// Arrival-order index of the first request on the line.
    pub first_request: u64,
    /// When the batch was dispatched to the device, unix nanoseconds; null when never.
    pub dispatch_unix_ns: Option<u64>,
    /// When its device work had completed, unix nanoseconds; null when never dispatched. May lie
    /// after the window's end for the batch running across it.
    pub complete_unix_ns: Option<u64>,
    /// The batch size the device ran (requests plus padding); 0 when never dispatched.
    pub padded: u32,
    /// Each request's scheduled arrival, unix nanoseconds, non-decreasing.
    pub arrivals_unix_ns: Vec<u64>,
}

/// Streams `requests.jsonl`, validating each line and the order of the lines.
///
/// A line is bad when it is not a complete JSON object of the [`RequestBatchRecord`] shape; when
/// its `first_request` is not the previous line's plus its requests (0 first); when it holds no
/// request or more than [`MAX_REQUESTS_PER_LINE`]; when arrivals decrease; when a dispatched
/// line's batch index is not the previous plus one (0 first), it completes before its
/// dispatch, is dispatched before one of its requests arrived or before the previous batch
/// completed, or runs fewer padded samples than requests; when a line has some but not all of
/// batch, dispatch and completion; or when a dispatched line follows a queued one.
#[derive(Debug)]
pub struct RequestReader<R> {
    lines: JsonLines<R>,
    next_first: u64,
    next_batch: u64,
    last_arrival: u64,
    last_complete: u64,
    queued_seen: bool,
}

impl RequestReader<BufReader<File>> {
    /// Opens `path` for reading.
    pub fn open(path: &Path) -> Result<Self, SchemaError> {
        let file = crate::read::open_regular(path)?;
        Ok(Self::new(path, BufReader::with_capacity(1 << 16, file)))
    }
}

impl<R: BufRead> RequestReader<R> {
    /// Reads from `reader`, naming `path` in errors.
    pub fn new(path: &Path, reader: R) -> Self {
        RequestReader {
            lines: JsonLines::new(path, reader, 1024),
            next_first: 0,
            next_batch: 0,
            last_arrival: 0,
            last_complete: 0,
            queued_seen: false,
        }
    }

    fn bad(&self, message: impl Into<String>) -> SchemaError {
        self.lines.bad(message)
    }

    fn next_record(&mut self) -> Option<Result<RequestBatchRecord, SchemaError>> {
        let record: RequestBatchRecord = match self.lines.next_json()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(self.check(record))
    }

    fn check(&mut self, r: RequestBatchRecord) -> Result<RequestBatchRecord, SchemaError> {
        if r.first_request != self.next_first {
            return Err(self.bad(format!(
                "first_request {} out of order (expected {})",
                r.first_request, self.next_first
            )));
        }
        let n = r.arrivals_unix_ns.len();
        if n == 0 || n > MAX_REQUESTS_PER_LINE {
            return Err(self.bad(format!(
                "a line holds 1 to {MAX_REQUESTS_PER_LINE} requests, this one {n}"
            )));
        }
        let mut previous = self.last_arrival;
        for (i, &a) in r.arrivals_unix_ns.iter().enumerate() {
            if a < previous {
                return Err(self.bad(format!(
                    "request {} arrives at {a}, before the request before it ({previous})",
                    r.first_request + i as u64
                )));
            }
            previous = a;
        }
        match (r.batch, r.dispatch_unix_ns, r.complete_unix_ns) {
            (Some(batch), Some(dispatch), Some(done)) => {
                if self.queued_seen {
                    return Err(self.bad(format!(
                        "batch {batch} follows requests listed as never dispatched"
                    )));
                }
                if batch != self.next_batch {
                    return Err(self.bad(format!(
                        "batch index {batch} out of order (expected {})",
                        self.next_batch
                    )));
                }
                if done < dispatch {
                    return Err(self.bad(format!(
                        "batch {batch} completes at {done}, before its dispatch at {dispatch}"
                    )));
                }
                if dispatch < previous {
                    return Err(self.bad(format!(
                        "batch {batch} is dispatched at {dispatch}, before its last request \
                         arrives at {previous}"
                    )));
                }
                if dispatch < self.last_complete {
                    return Err(self.bad(format!(
                        "batch {batch} is dispatched at {dispatch}, before the previous batch \
                         completed at {}",
                        self.last_complete
                    )));
                }
                if (r.padded as usize) < n {
                    return Err(self.bad(format!(
                        "batch {batch} runs {} padded samples for {n} requests",
                        r.padded
                    )));
                }
                self.next_batch += 1;
                self.last_complete = done;
            }
            (None, None, None) => {
                if r.padded != 0 {
                    return Err(self.bad(format!(
                        "requests never dispatched cannot have padded {}",
                        r.padded
                    )));
                }
                self.queued_seen = true;
            }
            _ => {
                return Err(self.bad(
                    "batch, dispatch_unix_ns and complete_unix_ns must be all set or all null",
                ));
            }
        }
        self.next_first += n as u64;
        self.last_arrival = previous;
        Ok(r)
    }
}

impl<R: BufRead> Iterator for RequestReader<R> {
    type Item = Result<RequestBatchRecord, SchemaError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<RequestBatchRecord>, SchemaError> {
        RequestReader::new(Path::new("r.jsonl"), text.as_bytes()).collect()
    }

    fn err(text: &str) -> String {
        read(text).unwrap_err().to_string()
    }

    const B0: &str = r#"{"batch":0,"first_request":0,"dispatch_unix_ns":10,"complete_unix_ns":20,"padded":2,"arrivals_unix_ns":[5,10]}"#;

    #[test]
    fn good_lines_parse() {
        let text = format!(
            "{B0}\n{}\n{}\n",
            r#"{"batch":1,"first_request":2,"dispatch_unix_ns":20,"complete_unix_ns":30,"padded":1,"arrivals_unix_ns":[12]}"#,
            r#"{"batch":null,"first_request":3,"dispatch_unix_ns":null,"complete_unix_ns":null,"padded":0,"arrivals_unix_ns":[25,29]}"#
        );
        let r = read(&text).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[2].batch, None);
        assert!(read("").unwrap().is_empty());
    }

    #[test]
    fn every_rule_names_the_line() {
        let line = |batch: &str, first: u64, d: &str, c: &str, padded: u32, arr: &str| {
            format!(
                r#"{{"batch":{batch},"first_request":{first},"dispatch_unix_ns":{d},"complete_unix_ns":{c},"padded":{padded},"arrivals_unix_ns":[{arr}]}}"#
            )
        };
        let cases = [
            (
                line("0", 1, "10", "20", 1, "5"),
                "r.jsonl:1: first_request 1 out of order (expected 0)",
            ),
            (
                line("0", 0, "10", "20", 1, ""),
                "r.jsonl:1: a line holds 1 to 1024 requests, this one 0",
            ),
            (
                line("0", 0, "10", "20", 2, "6,5"),
                "r.jsonl:1: request 1 arrives at 5, before the request before it (6)",
            ),
            (
                line("1", 0, "10", "20", 1, "5"),
                "r.jsonl:1: batch index 1 out of order (expected 0)",
            ),
            (
                line("0", 0, "20", "10", 1, "5"),
                "r.jsonl:1: batch 0 completes at 10, before its dispatch at 20",
            ),
            (
                line("0", 0, "4", "10", 1, "5"),
                "r.jsonl:1: batch 0 is dispatched at 4, before its last request arrives at 5",
            ),
            (
                line("0", 0, "10", "20", 1, "5,6"),
                "r.jsonl:1: batch 0 runs 1 padded samples for 2 requests",
            ),
            (
                line("null", 0, "10", "20", 1, "5"),
                "r.jsonl:1: batch, dispatch_unix_ns and complete_unix_ns must be all set or all null",
            ),
            (
                line("null", 0, "null", "null", 4, "5"),
                "r.jsonl:1: requests never dispatched cannot have padded 4",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(err(&format!("{text}\n")), expected);
        }
        // Across lines: overlap with the previous batch, arrivals going back, dispatched after
        // queued.
        let second = line("1", 2, "15", "30", 1, "12");
        assert_eq!(
            err(&format!("{B0}\n{second}\n")),
            "r.jsonl:2: batch 1 is dispatched at 15, before the previous batch completed at 20"
        );
        let second = line("1", 2, "20", "30", 1, "9");
        assert!(err(&format!("{B0}\n{second}\n")).contains("request 2 arrives at 9"));
        let queued = line("null", 2, "null", "null", 0, "30");
        let after = line("1", 3, "40", "50", 1, "31");
        assert_eq!(
            err(&format!("{B0}\n{queued}\n{after}\n")),
            "r.jsonl:3: batch 1 follows requests listed as never dispatched"
        );
        assert!(err(&B0[..40]).starts_with("r.jsonl:1: truncated line"));
        assert_eq!(err("\n"), "r.jsonl:1: empty line");
    }
}
