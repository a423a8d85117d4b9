//! A node's GPUs and their MIG devices, from NVML or from saved `nvidia-smi` text.
//!
//! [`Topology`] is what [`crate::visible`] resolves `CUDA_VISIBLE_DEVICES`-style lists against.
//! It comes from any [`NvmlSource`] ([`Topology::from_nvml`]), or from text a node printed and
//! someone saved, so that a study can be planned on a laptop (`--dry-run`):
//!
//! - `nvidia-smi -L` ([`Topology::from_listing`]): one `GPU n: NAME (UUID: GPU-...)` line per
//!   GPU and, under a GPU in MIG mode, one `MIG PROFILE Device m: (UUID: MIG-...)` line per MIG
//!   device (before driver R470 the MIG UUID reads `MIG-GPU-<uuid>/<gi>/<ci>`, which gives the
//!   GPU and compute instance ids too);
//! - `nvidia-smi --query-gpu=index,uuid,mig.mode.current --format=csv`
//!   ([`Topology::from_query_csv`], or [`Topology::with_query_csv`] on a listing): the MIG mode
//!   of every GPU, which the listing cannot say for a GPU in MIG mode with no instance yet
//!   (it prints the GPU line alone, as for a GPU with MIG off).
//!
//! Enumeration through NVML survives one bad device ([`EnumerationWarning`]): a GPU that cannot
//! be read is left out, a MIG device index NVML refuses with `NVML_ERROR_INVALID_ARGUMENT` or
//! `NVML_ERROR_NO_PERMISSION` is skipped (as NVIDIA's go-nvlib does), and a GPU whose MIG
//! devices cannot be listed offers none; every other GPU stays usable.

use crate::error::NvmlError;
use crate::nvml::{GpuFacts, MigFacts, NvmlSource, enumerate_mig_devices};

/// The GPUs of a node and their MIG devices.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Topology {
    /// The GPUs, in NVML index order.
    pub gpus: Vec<TopologyGpu>,
    /// What could not be enumerated (only from NVML).
    pub warnings: Vec<EnumerationWarning>,
}

/// One GPU of a [`Topology`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyGpu {
    /// The GPU (from a listing: index, UUID, name and MIG mode only).
    pub facts: GpuFacts,
    /// Its MIG devices, in index order (empty when MIG is off or no instance exists).
    pub migs: Vec<MigFacts>,
}

/// Something NVML could not enumerate; the rest of the topology stands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnumerationWarning {
    /// A GPU could not be read: it is left out of the topology.
    #[error("GPU {gpu_index} could not be read and is left out ({error})")]
    GpuUnreadable {
        /// Its NVML index.
        gpu_index: u32,
        /// What NVML said.
        error: NvmlError,
    },
    /// The MIG devices of a GPU in MIG mode could not be listed: it offers none.
    #[error("the MIG devices of GPU {gpu_index} could not be listed, so none is offered ({error})")]
    MigUnreadable {
        /// The GPU's NVML index.
        gpu_index: u32,
        /// What NVML said.
        error: NvmlError,
    },
    /// One MIG device index was refused and skipped.
    #[error("MIG device index {mig_index} of GPU {gpu_index} was skipped ({error})")]
    MigIndexSkipped {
        /// The GPU's NVML index.
        gpu_index: u32,
        /// The MIG device index.
        mig_index: u32,
        /// What NVML said (`NVML_ERROR_INVALID_ARGUMENT` or `NVML_ERROR_NO_PERMISSION`).
        error: NvmlError,
    },
}

/// Why saved `nvidia-smi` text could not be read as a topology.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListingError {
    /// A line of `nvidia-smi -L` that is neither a GPU nor a MIG device line.
    #[error("line {line}: `{text}` is no `nvidia-smi -L` line: {reason}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A MIG device line before any GPU line.
    #[error("line {line}: MIG device `{text}` is listed before any GPU")]
    MigWithoutGpu {
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
    /// A line of the `--query-gpu` csv that cannot be read.
    #[error("csv line {line}: `{text}`: {reason}")]
    Csv {
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The listing and the csv disagree about a GPU.
    #[error("GPU {index}: the listing says {listing} but the --query-gpu csv says {query}")]
    Mismatch {
        /// The GPU's index.
        index: u32,
        /// What the listing says.
        listing: String,
        /// What the csv says.
        query: String,
    },
    /// The same UUID twice.
    #[error("UUID {uuid} is listed twice")]
    DuplicateUuid {
        /// The UUID.
        uuid: String,
    },
}

impl Topology {
    /// Enumerates every GPU `source` sees with its MIG devices. Fails only when NVML cannot
    /// count the GPUs; every later failure is an [`EnumerationWarning`].
    pub fn from_nvml<S: NvmlSource + ?Sized>(source: &S) -> Result<Self, NvmlError> {
        let count = source.gpu_count()?;
        let mut out = Topology::default();
        for gpu_index in 0..count {
            let facts = match source.gpu(gpu_index) {
                Ok(f) => f,
                Err(error) => {
                    out.warnings
                        .push(EnumerationWarning::GpuUnreadable { gpu_index, error });
                    continue;
                }
            };
            let mut migs = Vec::new();
            if facts.mig_mode == Some(true) {
                match enumerate_mig_devices(source, gpu_index) {
                    Ok(e) => {
                        migs = e.devices;
                        out.warnings
                            .extend(e.skipped.into_iter().map(|(mig_index, error)| {
                                EnumerationWarning::MigIndexSkipped {
                                    gpu_index,
                                    mig_index,
                                    error,
                                }
                            }));
                    }
                    Err(error) => out
                        .warnings
                        .push(EnumerationWarning::MigUnreadable { gpu_index, error }),
                }
            }
            out.gpus.push(TopologyGpu { facts, migs });
        }
        Ok(out)
    }

    /// Reads `nvidia-smi -L` text. A GPU with MIG device lines is in MIG mode; for one
    /// without, the listing cannot tell (MIG off, or MIG on with no instance), so its
    /// `mig_mode` stays `None` until [`Topology::with_query_csv`] says.
    pub fn from_listing(listing: &str) -> Result<Self, ListingError> {
        let mut out = Topology::default();
        for (n, raw) in listing.lines().enumerate() {
            let line = n + 1;
            let text = raw.trim();
            if text.is_empty() {
                continue;
            }
            let bad = |reason| ListingError::Line {
                line,
                text: text.to_owned(),
                reason,
            };
            if let Some(rest) = text.strip_prefix("GPU ") {
                let (index, rest) = rest.split_once(": ").ok_or_else(|| bad("no `GPU n: `"))?;
                let index: u32 = index
                    .trim()
                    .parse()
                    .map_err(|_| bad("the GPU index is no number"))?;
                let (name, uuid) = split_uuid(rest).ok_or_else(|| bad("no `(UUID: ...)`"))?;
                if !uuid.starts_with("GPU-") {
                    return Err(bad("a GPU UUID starts with `GPU-`"));
                }
                out.gpus.push(TopologyGpu {
                    facts: GpuFacts {
                        index,
                        uuid: uuid.to_owned(),
                        name: name.to_owned(),
                        pci_bus_id: None,
                        mig_mode: None,
                        memory_total_bytes: None,
                        compute_mode: None,
                    },
                    migs: Vec::new(),
                });
            } else if let Some(rest) = text.strip_prefix("MIG ") {
                let (profile, rest) = rest
                    .trim_start()
                    .split_once(char::is_whitespace)
                    .ok_or_else(|| bad("no profile before `Device`"))?;
                let rest = rest
                    .trim_start()
                    .strip_prefix("Device")
                    .ok_or_else(|| bad("no `Device m:` after the profile"))?;
                let (index, rest) = rest.split_once(':').ok_or_else(|| bad("no `Device m:`"))?;
                let index: u32 = index
                    .trim()
                    .parse()
                    .map_err(|_| bad("the MIG device index is no number"))?;
                let (_, uuid) = split_uuid(rest).ok_or_else(|| bad("no `(UUID: ...)`"))?;
                if !uuid.starts_with("MIG-") {
                    return Err(bad("a MIG UUID starts with `MIG-`"));
                }
                let Some(gpu) = out.gpus.last_mut() else {
                    return Err(ListingError::MigWithoutGpu {
                        line,
                        text: text.to_owned(),
                    });
                };
                let legacy = parse_legacy_mig_uuid(uuid);
                if let Some((parent, _, _)) = &legacy
                    && *parent != gpu.facts.uuid
                {
                    return Err(bad(
                        "its MIG-GPU- UUID names another GPU than the one above it",
                    ));
                }
                gpu.facts.mig_mode = Some(true);
                gpu.migs.push(MigFacts {
                    index,
                    uuid: uuid.to_owned(),
                    name: Some(format!("{} MIG {profile}", gpu.facts.name)),
                    profile: Some(profile.to_owned()),
                    memory_total_bytes: None,
                    gpu_instance_id: legacy.as_ref().map(|l| l.1),
                    compute_instance_id: legacy.as_ref().map(|l| l.2),
                });
            } else {
                return Err(bad("it starts with neither `GPU ` nor `MIG `"));
            }
        }
        out.check_unique()?;
        Ok(out)
    }

    /// Reads `nvidia-smi --query-gpu=index,uuid,mig.mode.current --format=csv` text (with or
    /// without its header; a `name` column is used where present): GPUs without MIG devices,
    /// MIG mode `Enabled` / `Disabled`, or `[N/A]` (a GPU without MIG).
    pub fn from_query_csv(csv: &str) -> Result<Self, ListingError> {
        let mut out = Topology::default();
        for row in query_rows(csv)? {
            out.gpus.push(TopologyGpu {
                facts: GpuFacts {
                    index: row.index,
                    uuid: row.uuid,
                    name: row.name.unwrap_or_default(),
                    pci_bus_id: None,
                    mig_mode: row.mig_mode,
                    memory_total_bytes: None,
                    compute_mode: None,
                },
                migs: Vec::new(),
            });
        }
        out.check_unique()?;
        Ok(out)
    }

    /// This listing's topology with each GPU's MIG mode from the `--query-gpu` csv. Every GPU
    /// must be in both, with the same UUID; a GPU the csv says has MIG off must have no MIG
    /// device in the listing.
    pub fn with_query_csv(mut self, csv: &str) -> Result<Self, ListingError> {
        let rows = query_rows(csv)?;
        for gpu in &self.gpus {
            if !rows.iter().any(|r| r.index == gpu.facts.index) {
                return Err(ListingError::Mismatch {
                    index: gpu.facts.index,
                    listing: gpu.facts.uuid.clone(),
                    query: "nothing (the GPU is missing)".to_owned(),
                });
            }
        }
        for row in rows {
            let Some(gpu) = self.gpus.iter_mut().find(|g| g.facts.index == row.index) else {
                return Err(ListingError::Mismatch {
                    index: row.index,
                    listing: "nothing (the GPU is missing)".to_owned(),
                    query: row.uuid,
                });
            };
            if gpu.facts.uuid != row.uuid {
                return Err(ListingError::Mismatch {
                    index: row.index,
                    listing: gpu.facts.uuid.clone(),
                    query: row.uuid,
                });
            }
            if row.mig_mode != Some(true) && !gpu.migs.is_empty() {
                return Err(ListingError::Mismatch {
                    index: row.index,
                    listing: format!("{} MIG device(s)", gpu.migs.len()),
                    query: "MIG mode off".to_owned(),
                });
            }
            gpu.facts.mig_mode = row.mig_mode;
        }
        Ok(self)
    }

    /// The GPU with NVML index `index`.
    #[must_use]
    pub fn gpu(&self, index: u32) -> Option<&TopologyGpu> {
        self.gpus.iter().find(|g| g.facts.index == index)
    }

    fn check_unique(&self) -> Result<(), ListingError> {
        let mut seen = std::collections::BTreeSet::new();
        for uuid in self
            .gpus
            .iter()
            .flat_map(|g| std::iter::once(&g.facts.uuid).chain(g.migs.iter().map(|m| &m.uuid)))
        {
            if !seen.insert(uuid.as_str()) {
                return Err(ListingError::DuplicateUuid { uuid: uuid.clone() });
            }
        }
        Ok(())
    }
}

/// Splits `NAME (UUID: X)` into `NAME` and `X`.
fn split_uuid(text: &str) -> Option<(&str, &str)> {
    let (name, rest) = text.rsplit_once("(UUID:")?;
    let uuid = rest.trim().strip_suffix(')')?.trim();
    (!uuid.is_empty() && !uuid.contains(char::is_whitespace)).then_some((name.trim(), uuid))
}

/// The parent GPU UUID, GPU instance id and compute instance id of a pre-R470 MIG name,
/// `MIG-GPU-<uuid>/<gi>/<ci>`.
pub(crate) fn parse_legacy_mig_uuid(text: &str) -> Option<(String, u32, u32)> {
    let rest = text.strip_prefix("MIG-")?;
    if !rest.starts_with("GPU-") {
        return None;
    }
    let mut parts = rest.split('/');
    let gpu = parts.next()?;
    let gi = parts.next()?.parse().ok()?;
    let ci = parts.next()?.parse().ok()?;
    if parts.next().is_some() || gpu.len() <= "GPU-".len() {
        return None;
    }
    Some((gpu.to_owned(), gi, ci))
}

/// One row of the `--query-gpu` csv.
struct QueryRow {
    index: u32,
    uuid: String,
    name: Option<String>,
    mig_mode: Option<bool>,
}

fn query_rows(csv: &str) -> Result<Vec<QueryRow>, ListingError> {
    let mut columns: Option<(usize, usize, usize, Option<usize>)> = None;
    let mut rows = Vec::new();
    for (n, raw) in csv.lines().enumerate() {
        let line = n + 1;
        let text = raw.trim();
        if text.is_empty() {
            continue;
        }
        let cells: Vec<&str> = text.split(',').map(str::trim).collect();
        let bad = |reason: String| ListingError::Csv {
            line,
            text: text.to_owned(),
            reason,
        };
        if columns.is_none() && cells.iter().any(|c| c.eq_ignore_ascii_case("uuid")) {
            let find = |name: &str| cells.iter().position(|c| c.eq_ignore_ascii_case(name));
            let (Some(i), Some(u), Some(m)) =
                (find("index"), find("uuid"), find("mig.mode.current"))
            else {
                return Err(bad(
                    "the header needs index, uuid and mig.mode.current".to_owned()
                ));
            };
            columns = Some((i, u, m, find("name")));
            continue;
        }
        let (i, u, m, name) = *columns.get_or_insert((0, 1, 2, None));
        let cell = |k: usize| {
            cells.get(k).copied().ok_or_else(|| {
                bad(format!(
                    "{} column(s), column {} wanted",
                    cells.len(),
                    k + 1
                ))
            })
        };
        let index = cell(i)?
            .parse()
            .map_err(|_| bad("the index is no number".to_owned()))?;
        let uuid = cell(u)?;
        if !uuid.starts_with("GPU-") {
            return Err(bad(format!("`{uuid}` is no GPU UUID")));
        }
        let mig_mode = match cell(m)? {
            "Enabled" => Some(true),
            "Disabled" => Some(false),
            "[N/A]" | "N/A" | "[Not Supported]" => None,
            other => {
                return Err(bad(format!(
                    "`{other}` is no MIG mode (Enabled, Disabled, [N/A])"
                )));
            }
        };
        rows.push(QueryRow {
            index,
            uuid: uuid.to_owned(),
            name: name.and_then(|k| cells.get(k)).map(|s| (*s).to_owned()),
            mig_mode,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvml::mig_profile_from_name;
    use crate::{FakeNvml, NvmlCode};

    const A100_MIG: &str = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5d5b-cccc)
  MIG 3g.40gb     Device  0: (UUID: MIG-aaaa-0000)
  MIG 2g.20gb     Device  1: (UUID: MIG-aaaa-0001)
GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-6e6c-dddd)
";

    #[test]
    fn a_listing_gives_gpus_and_mig_devices() {
        let t = Topology::from_listing(A100_MIG).unwrap();
        assert_eq!(t.gpus.len(), 2);
        let g = &t.gpus[0];
        assert_eq!(g.facts.uuid, "GPU-5d5b-cccc");
        assert_eq!(g.facts.name, "NVIDIA A100-SXM4-80GB");
        assert_eq!(g.facts.mig_mode, Some(true));
        assert_eq!(g.migs[1].index, 1);
        assert_eq!(g.migs[1].profile.as_deref(), Some("2g.20gb"));
        assert_eq!(
            mig_profile_from_name(g.migs[1].name.as_deref().unwrap()).as_deref(),
            Some("2g.20gb")
        );
        assert_eq!(g.migs[1].gpu_instance_id, None);
        // Without MIG lines the listing cannot tell MIG off from MIG on without instances.
        assert_eq!(t.gpus[1].facts.mig_mode, None);
    }

    #[test]
    fn the_query_csv_settles_the_mig_mode() {
        let csv = "index, uuid, mig.mode.current\n0, GPU-5d5b-cccc, Enabled\n\
                   1, GPU-6e6c-dddd, Enabled\n";
        let t = Topology::from_listing(A100_MIG)
            .unwrap()
            .with_query_csv(csv)
            .unwrap();
        assert_eq!(t.gpus[1].facts.mig_mode, Some(true));
        assert!(t.gpus[1].migs.is_empty());

        let off = "0, GPU-5d5b-cccc, Enabled\n1, GPU-6e6c-dddd, Disabled\n";
        let t = Topology::from_listing(A100_MIG)
            .unwrap()
            .with_query_csv(off)
            .unwrap();
        assert_eq!(t.gpus[1].facts.mig_mode, Some(false));

        let alone = Topology::from_query_csv(
            "index, name, uuid, mig.mode.current\n\
             0, NVIDIA H200, GPU-1, [N/A]\n",
        )
        .unwrap();
        assert_eq!(alone.gpus[0].facts.name, "NVIDIA H200");
        assert_eq!(alone.gpus[0].facts.mig_mode, None);
    }

    #[test]
    fn a_csv_that_disagrees_with_the_listing_is_refused() {
        let listing = Topology::from_listing(A100_MIG).unwrap();
        let other_uuid = "0, GPU-5d5b-cccc, Enabled\n1, GPU-ffff, Enabled\n";
        assert!(matches!(
            listing.clone().with_query_csv(other_uuid),
            Err(ListingError::Mismatch { index: 1, .. })
        ));
        let mig_off = "0, GPU-5d5b-cccc, Disabled\n1, GPU-6e6c-dddd, Disabled\n";
        let e = listing.clone().with_query_csv(mig_off).unwrap_err();
        assert!(e.to_string().contains("2 MIG device(s)"), "{e}");
        let short = "0, GPU-5d5b-cccc, Enabled\n";
        assert!(listing.with_query_csv(short).is_err());
    }

    #[test]
    fn malformed_text_is_an_error_naming_the_line() {
        for (text, line) in [
            ("GPU 0: NVIDIA H200\n", 1),
            ("GPU x: NVIDIA H200 (UUID: GPU-1)\n", 1),
            ("GPU 0: NVIDIA H200 (UUID: GPU-1)\nhello\n", 2),
            ("GPU 0: NVIDIA H200 (UUID: MIG-1)\n", 1),
            (
                "GPU 0: NVIDIA H200 (UUID: GPU-1)\n  MIG 1g.18gb Device 0: (UUID: GPU-2)\n",
                2,
            ),
            (
                "GPU 0: NVIDIA H200 (UUID: GPU-1)\n  MIG 1g.18gb Device: (UUID: MIG-2)\n",
                2,
            ),
            (
                "GPU 0: X (UUID: GPU-1)\n  MIG 1g.5gb Device 0: (UUID: MIG-GPU-2/1/0)\n",
                2,
            ),
        ] {
            match Topology::from_listing(text) {
                Err(ListingError::Line { line: l, .. }) => assert_eq!(l, line, "{text}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert!(matches!(
            Topology::from_listing("  MIG 1g.18gb Device 0: (UUID: MIG-2)\n"),
            Err(ListingError::MigWithoutGpu { line: 1, .. })
        ));
        assert!(matches!(
            Topology::from_listing("GPU 0: X (UUID: GPU-1)\nGPU 1: X (UUID: GPU-1)\n"),
            Err(ListingError::DuplicateUuid { .. })
        ));
        for csv in [
            "index, uuid\n0, GPU-1\n",
            "0, GPU-1, Maybe\n",
            "x, GPU-1, Enabled\n",
            "0, 1, Enabled\n",
            "0, GPU-1\n",
        ] {
            assert!(
                matches!(Topology::from_query_csv(csv), Err(ListingError::Csv { .. })),
                "{csv}"
            );
        }
    }

    #[test]
    fn legacy_mig_names_carry_their_instance_ids() {
        assert_eq!(
            parse_legacy_mig_uuid("MIG-GPU-e86c-b44c/1/0"),
            Some(("GPU-e86c-b44c".to_owned(), 1, 0))
        );
        for bad in [
            "MIG-e86c",
            "MIG-GPU-e86c/1",
            "MIG-GPU-e86c/1/0/2",
            "MIG-GPU-/1/0",
            "MIG-GPU-e86c/x/0",
            "GPU-e86c/1/0",
        ] {
            assert_eq!(parse_legacy_mig_uuid(bad), None, "{bad}");
        }
    }

    #[test]
    fn one_unreadable_gpu_or_mig_index_spoils_nothing_else() {
        let nvml = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H100 80GB HBM3")
            .with_mig("1g.10gb", "MIG-a0")
            .with_mig_index_error(NvmlCode::NoPermission)
            .with_mig_index_error(NvmlCode::InvalidArgument)
            .with_mig("1g.10gb", "MIG-a3")
            .with_gpu("GPU-bbbb", "NVIDIA H100 80GB HBM3")
            .with_mig_enumeration_error(NvmlCode::Unknown)
            .with_gpu("GPU-cccc", "NVIDIA H100 80GB HBM3");
        let t = Topology::from_nvml(&nvml).unwrap();
        assert_eq!(t.gpus.len(), 3);
        let uuids: Vec<&str> = t.gpus[0].migs.iter().map(|m| m.uuid.as_str()).collect();
        assert_eq!(uuids, ["MIG-a0", "MIG-a3"]);
        assert_eq!(t.gpus[0].migs[1].index, 3);
        assert!(t.gpus[1].migs.is_empty());
        assert_eq!(t.gpus[2].facts.uuid, "GPU-cccc");
        let said: Vec<String> = t.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(
            said[0].starts_with("MIG device index 1 of GPU 0 was skipped"),
            "{said:?}"
        );
        assert!(
            said[1].starts_with("MIG device index 2 of GPU 0 was skipped"),
            "{said:?}"
        );
        assert!(
            said[2].starts_with("the MIG devices of GPU 1 could not be listed"),
            "{said:?}"
        );

        // Any other code on one index fails that GPU's MIG enumeration, not the node.
        let lost = FakeNvml::new()
            .with_gpu("GPU-aaaa", "NVIDIA H100 80GB HBM3")
            .with_mig("1g.10gb", "MIG-a0")
            .with_mig_index_error(NvmlCode::GpuIsLost)
            .with_gpu("GPU-bbbb", "NVIDIA H100 80GB HBM3");
        let t = Topology::from_nvml(&lost).unwrap();
        assert!(t.gpus[0].migs.is_empty());
        assert!(matches!(
            &t.warnings[..],
            [EnumerationWarning::MigUnreadable { gpu_index: 0, error }]
                if error.code() == Some(NvmlCode::GpuIsLost)
        ));
        assert_eq!(t.gpus[1].facts.uuid, "GPU-bbbb");
    }
}
