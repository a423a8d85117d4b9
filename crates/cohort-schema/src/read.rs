//! Versioned readers and an atomic writer for the documents.
//!
//! Readers never panic on bad input: every problem becomes a [`SchemaError`] naming the file and,
//! for JSON-lines files, the 1-based line number.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::SCHEMA_VERSION;
use crate::batch::BatchRecord;
use crate::error::SchemaError;
use crate::worker::WorkerReport;

/// Checks the `schema_version` of a parsed document.
pub fn check_version(path: &Path, doc: &serde_json::Value) -> Result<(), SchemaError> {
    let Some(version) = doc.get("schema_version") else {
        return Err(SchemaError::MissingVersion {
            path: path.to_owned(),
        });
    };
    match version.as_u64() {
        Some(v) if v >= 1 && v <= u64::from(SCHEMA_VERSION) => Ok(()),
        Some(v) => Err(SchemaError::UnsupportedVersion {
            path: path.to_owned(),
            found: v,
            supported: SCHEMA_VERSION,
        }),
        None => Err(SchemaError::Invalid {
            path: path.to_owned(),
            message: format!("schema_version must be a positive integer, found {version}"),
        }),
    }
}

/// The largest JSON document read (a worker's report is tens of KB; a study's index of a
/// thousand cohorts a few MB).
pub const MAX_DOCUMENT_BYTES: u64 = 256 << 20;
/// The longest line of a JSON-lines file (a serve-llm request with every token's time is tens
/// of KB).
pub const MAX_LINE_BYTES: u64 = 16 << 20;

/// The largest JSON-lines file read whole (telemetry of a long window is a few MB).
pub const MAX_LINES_FILE_BYTES: u64 = 1 << 30;

/// Opens `path` for reading when it is a regular file: a FIFO or a device given (or planted) in
/// its place is refused, never read.
pub(crate) fn open_regular(path: &Path) -> Result<File, SchemaError> {
    let io = |source| SchemaError::Io {
        path: path.to_owned(),
        source,
    };
    // Checked before the open too: opening a FIFO would wait for a writer.
    if !fs::metadata(path).map_err(io)?.is_file() {
        return Err(io(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    let file = File::open(path).map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(io(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    Ok(file)
}

/// The bytes of the regular file `path`, refused past `max` bytes naming the cap.
fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, SchemaError> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut io::Read::take(file, max + 1), &mut bytes).map_err(|source| {
        SchemaError::Io {
            path: path.to_owned(),
            source,
        }
    })?;
    if bytes.len() as u64 > max {
        return Err(SchemaError::Invalid {
            path: path.to_owned(),
            message: format!("larger than the cap of {max} bytes for this file"),
        });
    }
    Ok(bytes)
}

/// The largest arrivals trace read (a million requests take about 20 MB).
pub const MAX_TRACE_BYTES: u64 = 256 << 20;

/// The text of the regular file `path`, refused past `max` bytes naming the cap, or when it is
/// not UTF-8: for inputs a user names (an arrivals trace).
pub fn read_text(path: &Path, max: u64) -> Result<String, SchemaError> {
    String::from_utf8(read_capped(path, max)?).map_err(|_| SchemaError::Invalid {
        path: path.to_owned(),
        message: "not valid UTF-8".into(),
    })
}

/// Reads a versioned JSON document of type `T` from `path` (a regular file of at most
/// [`MAX_DOCUMENT_BYTES`]).
pub fn read_document<T: DeserializeOwned>(path: &Path) -> Result<T, SchemaError> {
    let bytes = read_capped(path, MAX_DOCUMENT_BYTES)?;
    parse_document(path, &bytes)
}

/// Parses a versioned JSON document of type `T` from `bytes`, checking `schema_version` before
/// the shape, naming `path` in errors. Never panics, whatever the bytes.
pub fn parse_document<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T, SchemaError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| SchemaError::Invalid {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    check_version(path, &value)?;
    serde_json::from_value(value).map_err(|e| SchemaError::Invalid {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Reads `worker.json`.
pub fn read_worker_report(path: &Path) -> Result<WorkerReport, SchemaError> {
    read_document(path)
}

/// A JSON-lines file read one record at a time, with the path and the 1-based line number every
/// error names. Shared by the streaming readers ([`BatchReader`], `RequestReader`), which add
/// their own checks of each record.
#[derive(Debug)]
pub(crate) struct JsonLines<R> {
    pub(crate) path: PathBuf,
    reader: R,
    pub(crate) line: u64,
    buf: String,
}

impl<R: BufRead> JsonLines<R> {
    pub(crate) fn new(path: &Path, reader: R, capacity: usize) -> Self {
        JsonLines {
            path: path.to_owned(),
            reader,
            line: 0,
            buf: String::with_capacity(capacity),
        }
    }

    /// An error about the current line.
    pub(crate) fn bad(&self, message: impl Into<String>) -> SchemaError {
        SchemaError::BadLine {
            path: self.path.clone(),
            line: self.line,
            message: message.into(),
        }
    }

    /// The next line as a `T`; `None` at the end. An empty line, a line that is not UTF-8 or
    /// not a `T`, and a last line cut short are errors naming the line.
    pub(crate) fn next_json<T: DeserializeOwned>(&mut self) -> Option<Result<T, SchemaError>> {
        self.buf.clear();
        // A line without an end (a forged or runaway file) stops at the cap, not at the
        // memory's end.
        match io::Read::take(&mut self.reader, MAX_LINE_BYTES + 1).read_line(&mut self.buf) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                self.line += 1;
                return Some(Err(self.bad("not valid UTF-8")));
            }
            Err(source) => {
                return Some(Err(SchemaError::Io {
                    path: self.path.clone(),
                    source,
                }));
            }
        }
        self.line += 1;
        if self.buf.len() as u64 > MAX_LINE_BYTES {
            return Some(Err(self.bad(format!(
                "line longer than the cap of {MAX_LINE_BYTES} bytes"
            ))));
        }
        let complete = self.buf.ends_with('\n');
        let text = self.buf.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            return Some(Err(self.bad("empty line")));
        }
        Some(match serde_json::from_str(text) {
            Ok(r) => Ok(r),
            Err(e) if e.is_eof() || !complete && e.is_syntax() => {
                Err(self.bad(format!("truncated line: {e}")))
            }
            Err(e) => Err(self.bad(e.to_string())),
        })
    }
}

/// Streams `batches.jsonl`, validating each line and the order of the lines.
///
/// A line is bad when it is not a complete JSON object of the [`BatchRecord`] shape, when its
/// batch ends before it starts, when its index is not the previous one plus one (the first is 0),
/// or when it starts before the previous batch ended (batches of one worker never overlap).
#[derive(Debug)]
pub struct BatchReader<R> {
    lines: JsonLines<R>,
    previous: Option<BatchRecord>,
}

impl BatchReader<BufReader<File>> {
    /// Opens `path` for reading.
    pub fn open(path: &Path) -> Result<Self, SchemaError> {
        let file = open_regular(path)?;
        Ok(Self::new(path, BufReader::with_capacity(1 << 16, file)))
    }
}

impl<R: BufRead> BatchReader<R> {
    /// Reads from `reader`, naming `path` in errors.
    pub fn new(path: &Path, reader: R) -> Self {
        BatchReader {
            lines: JsonLines::new(path, reader, 128),
            previous: None,
        }
    }

    fn bad(&self, message: impl Into<String>) -> SchemaError {
        self.lines.bad(message)
    }

    fn next_record(&mut self) -> Option<Result<BatchRecord, SchemaError>> {
        let record: BatchRecord = match self.lines.next_json()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        if record.end_unix_ns < record.start_unix_ns {
            return Some(Err(self.bad(format!(
                "batch {} ends before it starts (start {} > end {})",
                record.index, record.start_unix_ns, record.end_unix_ns
            ))));
        }
        let expected_index = self.previous.map_or(0, |p| p.index + 1);
        if record.index != expected_index {
            return Some(Err(self.bad(format!(
                "batch index {} out of order (expected {expected_index})",
                record.index
            ))));
        }
        if let Some(p) = self.previous
            && record.start_unix_ns < p.end_unix_ns
        {
            return Some(Err(self.bad(format!(
                "batch {} starts at {} before batch {} ended at {}",
                record.index, record.start_unix_ns, p.index, p.end_unix_ns
            ))));
        }
        self.previous = Some(record);
        Some(Ok(record))
    }
}

impl<R: BufRead> Iterator for BatchReader<R> {
    type Item = Result<BatchRecord, SchemaError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

/// Reads every line of `batches.jsonl` at `path`.
pub fn read_batches(path: &Path) -> Result<Vec<BatchRecord>, SchemaError> {
    BatchReader::open(path)?.collect()
}

/// Reads batch records from text, naming `path` in errors.
pub fn read_batches_str(
    path: impl AsRef<Path>,
    text: &str,
) -> Result<Vec<BatchRecord>, SchemaError> {
    BatchReader::new(path.as_ref(), text.as_bytes()).collect()
}

/// Reads a small JSON-lines file of `T` records (`telemetry.jsonl`, `gpm.jsonl`) whole, naming
/// the file and the 1-based line of the first line that is not a `T`. Blank lines are skipped.
pub fn read_lines<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, SchemaError> {
    let text = read_text(path, MAX_LINES_FILE_BYTES)?;
    parse_lines(path, &text)
}

fn parse_lines<T: DeserializeOwned>(path: &Path, text: &str) -> Result<Vec<T>, SchemaError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| SchemaError::BadLine {
                path: path.to_owned(),
                line: i as u64 + 1,
                message: e.to_string(),
            })
        })
        .collect()
}

/// Writes `value` as pretty JSON to `path` through [`write_atomic`].
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<(), SchemaError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| SchemaError::Write {
        path: path.to_owned(),
        source: io::Error::new(io::ErrorKind::InvalidData, e),
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Writes `bytes` to `path` through a temporary file in the same directory, created exclusively
/// (never through a link someone planted there), fsynced and renamed into place, so a reader
/// sees either nothing or the whole file, and a link at `path` itself is replaced, never
/// followed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SchemaError> {
    let werr = |source| SchemaError::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| werr(io::Error::new(io::ErrorKind::InvalidInput, "no file name")))?;
    let (tmp, mut file) = create_temp(dir, &name.to_string_lossy()).map_err(werr)?;
    let result = (|| {
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        // Make the rename itself durable.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(werr)
}

/// How many names [`create_temp`] tries before it gives up.
const TEMP_ATTEMPTS: u32 = 64;

/// A new temporary file beside the target, created exclusively (`O_CREAT | O_EXCL`, which never
/// follows a symbolic link, dangling or not): a name someone planted (a link to a victim file,
/// a file of their own) is passed over for the next one, never opened.
fn create_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    let pid = std::process::id();
    // The time makes the names of two writers of one pid (after a restart) differ too.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for attempt in 0..TEMP_ATTEMPTS {
        let tmp = dir.join(format!(".{name}.tmp.{pid}.{nanos:x}.{attempt}"));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{TEMP_ATTEMPTS} temporary names for {name} in {} already exist",
            dir.display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line without an end stops at the cap, named, instead of growing until memory ends.
    #[test]
    fn a_line_over_the_cap_is_refused_naming_it() {
        let long = format!(
            "{{\"index\":{}",
            "0".repeat(usize::try_from(MAX_LINE_BYTES).unwrap())
        );
        let e = read_batches_str("b.jsonl", &long).unwrap_err().to_string();
        assert!(
            e.starts_with("b.jsonl:1: line longer than the cap of"),
            "{e}"
        );
    }

    /// An input is a regular file under its cap: a device is refused at once, never read, and
    /// a file over the cap is refused naming it.
    #[cfg(unix)]
    #[test]
    fn inputs_are_regular_files_under_their_cap() {
        let e = read_text(Path::new("/dev/zero"), 10)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/zero") && e.contains("not a regular file"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("trace.txt");
        fs::write(&big, "0.5\n".repeat(25)).unwrap();
        assert_eq!(read_text(&big, 100).unwrap().len(), 100);
        let e = read_text(&big, 99).unwrap_err().to_string();
        assert!(e.contains("larger than the cap of 99 bytes"), "{e}");
    }

    /// A link planted at every name the writer could pick for its temporary file is passed over:
    /// the victim it points at keeps its text and the target gets the document.
    #[cfg(unix)]
    #[test]
    fn a_planted_temp_link_is_never_written_through() {
        let tmpdir = tempfile::tempdir().unwrap();
        let dir = tmpdir.path();
        let victim = dir.join("victim");
        fs::write(&victim, "keep").unwrap();
        let pid = std::process::id();
        // The predictable name a writer of this pid used to open with `File::create`.
        std::os::unix::fs::symlink(&victim, dir.join(format!(".x.json.tmp.{pid}"))).unwrap();
        let target = dir.join("x.json");
        write_json_atomic(&target, &serde_json::json!({"a": 1})).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(fs::read_to_string(&target).unwrap(), "{\n  \"a\": 1\n}\n");
        assert!(fs::symlink_metadata(&target).unwrap().is_file());
        // A name that exists is passed over, never opened.
        let (first, _f) = create_temp(dir, "y.json").unwrap();
        let (second, _g) = create_temp(dir, "y.json").unwrap();
        assert_ne!(first, second);
    }

    fn err_text(text: &str) -> String {
        read_batches_str("b.jsonl", text).unwrap_err().to_string()
    }

    #[test]
    fn good_lines_parse() {
        let text = "{\"index\":0,\"start_unix_ns\":1,\"end_unix_ns\":5,\"samples\":2}\n\
                    {\"index\":1,\"start_unix_ns\":5,\"end_unix_ns\":9,\"samples\":2}\n";
        let b = read_batches_str("b.jsonl", text).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[1].duration_ns(), 4);
    }

    #[test]
    fn truncated_last_line_names_the_line() {
        let text =
            "{\"index\":0,\"start_unix_ns\":1,\"end_unix_ns\":5,\"samples\":2}\n{\"index\":1,\"sta";
        let e = err_text(text);
        assert!(e.starts_with("b.jsonl:2: truncated line"), "{e}");
    }

    #[test]
    fn wrong_type_names_the_line() {
        let e = err_text("{\"index\":0,\"start_unix_ns\":\"x\",\"end_unix_ns\":5,\"samples\":2}\n");
        assert!(e.starts_with("b.jsonl:1: invalid type"), "{e}");
    }

    #[test]
    fn nan_and_negative_values_are_refused() {
        let e = err_text("{\"index\":0,\"start_unix_ns\":NaN,\"end_unix_ns\":5,\"samples\":2}\n");
        assert!(e.starts_with("b.jsonl:1:"), "{e}");
        let e = err_text("{\"index\":0,\"start_unix_ns\":-3,\"end_unix_ns\":5,\"samples\":2}\n");
        assert!(e.starts_with("b.jsonl:1: invalid value"), "{e}");
    }

    #[test]
    fn end_before_start_is_refused() {
        let e = err_text("{\"index\":0,\"start_unix_ns\":9,\"end_unix_ns\":5,\"samples\":2}\n");
        assert_eq!(
            e,
            "b.jsonl:1: batch 0 ends before it starts (start 9 > end 5)"
        );
    }

    #[test]
    fn order_is_checked() {
        let e = err_text(
            "{\"index\":0,\"start_unix_ns\":1,\"end_unix_ns\":5,\"samples\":2}\n\
             {\"index\":2,\"start_unix_ns\":5,\"end_unix_ns\":9,\"samples\":2}\n",
        );
        assert_eq!(e, "b.jsonl:2: batch index 2 out of order (expected 1)");
        let e = err_text(
            "{\"index\":0,\"start_unix_ns\":1,\"end_unix_ns\":5,\"samples\":2}\n\
             {\"index\":1,\"start_unix_ns\":4,\"end_unix_ns\":9,\"samples\":2}\n",
        );
        assert_eq!(
            e,
            "b.jsonl:2: batch 1 starts at 4 before batch 0 ended at 5"
        );
    }

    #[test]
    fn empty_and_garbage_lines_are_refused() {
        assert_eq!(err_text("\n"), "b.jsonl:1: empty line");
        assert!(err_text("\u{0}\u{1}garbage\n").starts_with("b.jsonl:1:"));
        assert!(read_batches_str("b.jsonl", "").unwrap().is_empty());
    }

    #[test]
    fn small_jsonl_files_name_their_bad_line() {
        let p = Path::new("t.jsonl");
        let ok: Vec<crate::TelemetrySample> = parse_lines(
            p,
            "{\"t_unix_ns\":1}\n\n{\"t_unix_ns\":2,\"energy_mj\":5}\n",
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[1].energy_mj, Some(5));
        let e =
            parse_lines::<crate::TelemetrySample>(p, "{\"t_unix_ns\":1}\n{\"t_unix_ns\":\"x\"}\n")
                .unwrap_err();
        assert!(e.to_string().starts_with("t.jsonl:2: invalid type"), "{e}");
    }

    #[test]
    fn versions_are_checked() {
        let p = Path::new("w.json");
        assert!(check_version(p, &serde_json::json!({"schema_version": 1})).is_ok());
        let e = check_version(p, &serde_json::json!({"schema_version": 2})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "w.json: schema_version 2 is not supported by this reader (it reads up to 1); upgrade coload to read it"
        );
        assert!(matches!(
            check_version(p, &serde_json::json!({})),
            Err(SchemaError::MissingVersion { .. })
        ));
        assert!(matches!(
            check_version(p, &serde_json::json!({"schema_version": "1"})),
            Err(SchemaError::Invalid { .. })
        ));
    }
}
