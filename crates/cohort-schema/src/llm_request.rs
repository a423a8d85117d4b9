//! `llm_requests.jsonl`: a `serve-llm` worker's requests, one line per request.
//!
//! One line per request, in arrival order: its scheduled arrival, its lengths, when it was
//! admitted (its prefill began), and when each of its output tokens was out (the iteration that
//! produced it returned, after a device synchronize). TTFT, TPOT, the inter-token latencies and
//! the end-to-end latency follow from these; a request never admitted has no times. The worker
//! writes the file after its window from the scheduler's preallocated records. Times may lie
//! after the window's end for the iteration that ran across it.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::SchemaError;
use crate::read::JsonLines;

/// One line of `llm_requests.jsonl`: one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmRequestLine {
    /// 0-based index in arrival order.
    pub index: u64,
    /// Scheduled (open-loop) arrival, unix nanoseconds.
    pub arrival_unix_ns: u64,
    /// Prompt length, tokens.
    pub prompt_tokens: u32,
    /// Output length asked for, tokens.
    pub output_tokens: u32,
    /// When its prefill began, unix nanoseconds; null when never admitted.
    pub admitted_unix_ns: Option<u64>,
    /// When its first token was out (its prefill returned), unix nanoseconds; null when none.
    pub first_token_unix_ns: Option<u64>,
    /// When its latest token was out (its last, when it completed), unix nanoseconds.
    pub last_token_unix_ns: Option<u64>,
    /// Tokens generated (by the window's end, or by the iteration running across it).
    pub tokens_generated: u32,
    /// Whether every output token was out by the worker's window's end.
    pub completed: bool,
    /// When each generated token was out, unix nanoseconds, non-decreasing (the first from the
    /// prefill); `tokens_generated` of them.
    pub token_unix_ns: Vec<u64>,
}

impl LlmRequestLine {
    /// Time to first token from the scheduled arrival, nanoseconds.
    #[must_use]
    pub fn ttft_ns(&self) -> Option<u64> {
        self.first_token_unix_ns
            .map(|t| t.saturating_sub(self.arrival_unix_ns))
    }
}

/// Streams `llm_requests.jsonl`, validating each line and their order.
///
/// A line is bad when it is not a complete JSON object of the [`LlmRequestLine`] shape; when its
/// index is not the previous plus one (0 first); when its arrival is before the previous line's;
/// when a length is 0; when it generated more tokens than it asked for, or lists another number
/// of token times than it generated; when its token times decrease, or its first and last token
/// differ from its first and last token time; when it was admitted before it arrived or made
/// its first token before it was admitted; when it has tokens without an admission; or when it
/// is `completed` without all its tokens.
#[derive(Debug)]
pub struct LlmRequestReader<R> {
    lines: JsonLines<R>,
    next_index: u64,
    last_arrival: u64,
}

impl LlmRequestReader<BufReader<File>> {
    /// Opens `path` for reading.
    pub fn open(path: &Path) -> Result<Self, SchemaError> {
        let file = crate::read::open_regular(path)?;
        Ok(Self::new(path, BufReader::with_capacity(1 << 16, file)))
    }
}

impl<R: BufRead> LlmRequestReader<R> {
    /// Reads from `reader`, naming `path` in errors.
    pub fn new(path: &Path, reader: R) -> Self {
        LlmRequestReader {
            lines: JsonLines::new(path, reader, 4096),
            next_index: 0,
            last_arrival: 0,
        }
    }

    fn check(&mut self, r: LlmRequestLine) -> Result<LlmRequestLine, SchemaError> {
        let bad = |m: String| Err(self.lines.bad(m));
        if r.index != self.next_index {
            return bad(format!(
                "index {} out of order (expected {})",
                r.index, self.next_index
            ));
        }
        if r.arrival_unix_ns < self.last_arrival {
            return bad(format!(
                "request {} arrives at {}, before the request before it ({})",
                r.index, r.arrival_unix_ns, self.last_arrival
            ));
        }
        if r.prompt_tokens == 0 || r.output_tokens == 0 {
            return bad(format!(
                "request {} asks for {} prompt and {} output tokens; both must be at least 1",
                r.index, r.prompt_tokens, r.output_tokens
            ));
        }
        if r.tokens_generated > r.output_tokens
            || r.token_unix_ns.len() != r.tokens_generated as usize
        {
            return bad(format!(
                "request {} generated {} of {} tokens with {} token times",
                r.index,
                r.tokens_generated,
                r.output_tokens,
                r.token_unix_ns.len()
            ));
        }
        if r.token_unix_ns.windows(2).any(|w| w[1] < w[0]) {
            return bad(format!("request {}'s token times decrease", r.index));
        }
        if r.first_token_unix_ns != r.token_unix_ns.first().copied()
            || r.last_token_unix_ns != r.token_unix_ns.last().copied()
        {
            return bad(format!(
                "request {}'s first_token_unix_ns and last_token_unix_ns must be its first and \
                 last token times",
                r.index
            ));
        }
        match (r.admitted_unix_ns, r.first_token_unix_ns) {
            (None, Some(_)) => {
                return bad(format!("request {} has tokens but no admission", r.index));
            }
            (Some(a), _) if a < r.arrival_unix_ns => {
                return bad(format!(
                    "request {} is admitted at {a}, before it arrives at {}",
                    r.index, r.arrival_unix_ns
                ));
            }
            (Some(a), Some(f)) if f < a => {
                return bad(format!(
                    "request {}'s first token is out at {f}, before its admission at {a}",
                    r.index
                ));
            }
            _ => {}
        }
        if r.completed && r.tokens_generated != r.output_tokens {
            return bad(format!(
                "request {} is completed with {} of {} tokens",
                r.index, r.tokens_generated, r.output_tokens
            ));
        }
        self.next_index += 1;
        self.last_arrival = r.arrival_unix_ns;
        Ok(r)
    }
}

impl<R: BufRead> Iterator for LlmRequestReader<R> {
    type Item = Result<LlmRequestLine, SchemaError>;

    fn next(&mut self) -> Option<Self::Item> {
        let record: LlmRequestLine = match self.lines.next_json()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(self.check(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<LlmRequestLine>, SchemaError> {
        LlmRequestReader::new(Path::new("r.jsonl"), text.as_bytes()).collect()
    }

    fn line(index: u64, arrival: u64, admitted: &str, tokens: &[u64], output: u32) -> String {
        let times: Vec<String> = tokens.iter().map(ToString::to_string).collect();
        let opt = |v: Option<&u64>| v.map_or_else(|| "null".to_owned(), ToString::to_string);
        format!(
            r#"{{"index":{index},"arrival_unix_ns":{arrival},"prompt_tokens":4,"output_tokens":{output},"admitted_unix_ns":{admitted},"first_token_unix_ns":{},"last_token_unix_ns":{},"tokens_generated":{},"completed":{},"token_unix_ns":[{}]}}"#,
            opt(tokens.first()),
            opt(tokens.last()),
            tokens.len(),
            tokens.len() == output as usize,
            times.join(",")
        )
    }

    #[test]
    fn good_lines_parse() {
        let text = format!(
            "{}\n{}\n{}\n",
            line(0, 10, "12", &[20, 25, 30], 3),
            line(1, 11, "20", &[28], 3),
            line(2, 40, "null", &[], 3)
        );
        let r = read(&text).unwrap();
        assert_eq!(r.len(), 3);
        assert!(r[0].completed && !r[1].completed);
        assert_eq!(r[0].ttft_ns(), Some(10));
        assert_eq!(r[2].ttft_ns(), None);
        assert!(read("").unwrap().is_empty());
    }

    #[test]
    fn every_rule_names_the_line() {
        let cases = [
            (
                line(1, 10, "12", &[20], 1),
                "index 1 out of order (expected 0)",
            ),
            (
                line(0, 10, "12", &[20, 19], 2),
                "request 0's token times decrease",
            ),
            (
                line(0, 10, "null", &[20], 1),
                "request 0 has tokens but no admission",
            ),
            (
                line(0, 10, "9", &[20], 1),
                "request 0 is admitted at 9, before it arrives at 10",
            ),
            (
                line(0, 10, "12", &[11], 1),
                "request 0's first token is out at 11, before its admission at 12",
            ),
            (
                line(0, 10, "12", &[20, 21], 1),
                "request 0 generated 2 of 1 tokens with 2 token times",
            ),
            (
                line(0, 10, "12", &[20], 0),
                "request 0 asks for 4 prompt and 0 output tokens; both must be at least 1",
            ),
            (
                line(0, 10, "12", &[20], 2).replace(r#""completed":false"#, r#""completed":true"#),
                "request 0 is completed with 1 of 2 tokens",
            ),
            (
                line(0, 10, "12", &[20, 30], 2)
                    .replace(r#""last_token_unix_ns":30"#, r#""last_token_unix_ns":29"#),
                "request 0's first_token_unix_ns and last_token_unix_ns must be its first and \
                 last token times",
            ),
            (
                line(0, 10, "12", &[20, 30], 2)
                    .replace(r#""tokens_generated":2"#, r#""tokens_generated":1"#),
                "request 0 generated 1 of 2 tokens with 2 token times",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(
                read(&format!("{text}\n")).unwrap_err().to_string(),
                format!("r.jsonl:1: {expected}")
            );
        }
        let text = format!(
            "{}\n{}\n",
            line(0, 10, "12", &[20], 1),
            line(1, 9, "12", &[20], 1)
        );
        assert_eq!(
            read(&text).unwrap_err().to_string(),
            "r.jsonl:2: request 1 arrives at 9, before the request before it (10)"
        );
    }
}
