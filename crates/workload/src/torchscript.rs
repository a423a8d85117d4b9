//! A user's TorchScript model (`--model-file`): loading, the file's digest, and the checks that
//! refuse an unusable file while the step is built, before the worker reaches the barrier.
//!
//! Inference loads the module with `CModule` (eval mode); training loads it with tch's
//! `TrainableCModule`, which registers every parameter in a `VarStore` (sharing storage with
//! the module), so the same foreach SGD as the built-in models updates the module in place.
//! One forward on the real batch shape, without autograd, proves that the module takes
//! `--input-shape` and returns `[batch, --num-classes]` logits.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::Path;

use coload_cohort_schema::{ModelFile, Workload};
use sha2::{Digest, Sha256};
use tch::nn::VarStore;
use tch::{CModule, Device, IValue, Tensor, TrainableCModule};

use crate::error::{ModelFileProblem, WorkloadError};
use crate::options::TorchScriptSpec;

/// A loaded TorchScript module, in the form its workload needs.
#[derive(Debug)]
pub(crate) enum Script {
    /// Eval mode, for inference.
    Infer(CModule),
    /// Train mode, its parameters registered in the step's `VarStore`.
    Train(TrainableCModule),
}

impl Script {
    pub(crate) fn forward(&self, xs: &Tensor) -> Result<Tensor, WorkloadError> {
        let out = match self {
            Script::Infer(m) => m.forward_ts(&[xs]),
            Script::Train(m) => m.forward_ts(&[xs]),
        };
        out.map_err(WorkloadError::from)
    }

    /// Parameters that require a gradient, counted in elements.
    pub(crate) fn parameter_count(&self, vs: &VarStore) -> Result<u64, WorkloadError> {
        match self {
            Script::Infer(m) => Ok(m
                .named_parameters()?
                .iter()
                .filter(|(_, t)| t.requires_grad())
                .map(|(_, t)| t.numel() as u64)
                .sum()),
            Script::Train(_) => Ok(vs
                .trainable_variables()
                .iter()
                .map(|t| t.numel() as u64)
                .sum()),
        }
    }
}

fn refuse(path: &Path, problem: ModelFileProblem, message: impl Into<String>) -> WorkloadError {
    WorkloadError::ModelFile {
        path: path.to_owned(),
        problem,
        message: message.into(),
    }
}

/// libtorch's message of a tch error, without tch's wrapping; for an error raised inside the
/// TorchScript interpreter, its final line (the error itself) without the two tracebacks of
/// serialized and original code that precede it.
fn libtorch_message(e: tch::TchError) -> String {
    let message = match WorkloadError::from(e) {
        WorkloadError::Libtorch(m) | WorkloadError::OutOfMemory(m) => m,
        other => other.to_string(),
    };
    if message.starts_with("The following operation failed in the TorchScript interpreter")
        && let Some(last) = message.lines().rev().find(|l| !l.trim().is_empty())
    {
        return last.trim().to_owned();
    }
    message
}

/// SHA-256 of the file at `path`, lowercase hex; a missing or unreadable file is refused.
pub(crate) fn sha256_file(path: &Path) -> Result<String, WorkloadError> {
    let mut file = File::open(path).map_err(|e| match e.kind() {
        ErrorKind::NotFound => refuse(
            path,
            ModelFileProblem::Missing,
            "no such file; give the path of a module saved with torch.jit.save (or \
             torch.jit.script(model).save(path))",
        ),
        _ => refuse(
            path,
            ModelFileProblem::Unreadable,
            format!("cannot open it: {e}"),
        ),
    })?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0_u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(|e| {
            refuse(
                path,
                ModelFileProblem::Unreadable,
                format!("cannot read it: {e}"),
            )
        })?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let mut hex = String::with_capacity(64);
    for b in hasher.finalize() {
        let _ = write!(hex, "{b:02x}");
    }
    Ok(hex)
}

/// Loads `spec` for `workload` on `device` (training registers its parameters in `vs`), and
/// checks it with one forward on `inputs` (the real batch). Returns the module and what
/// identifies it in the configuration.
pub(crate) fn load(
    spec: &TorchScriptSpec,
    workload: Workload,
    device: Device,
    vs: &VarStore,
    inputs: &Tensor,
) -> Result<(Script, ModelFile), WorkloadError> {
    let path = spec.path.as_path();
    let sha256 = sha256_file(path)?;
    let not_script = |e: tch::TchError| {
        let message = libtorch_message(e);
        if message.to_ascii_lowercase().contains("out of memory") {
            return WorkloadError::OutOfMemory(message);
        }
        refuse(
            path,
            ModelFileProblem::NotTorchScript,
            format!(
                "libtorch cannot load it as a TorchScript module (save one with \
                 torch.jit.script(model).save(path) or torch.jit.trace): {message}"
            ),
        )
    };
    let mut script = match workload {
        Workload::Hog | Workload::Decode | Workload::ServeLlm => {
            return Err(crate::options::not_a_model_step());
        }
        Workload::Infer | Workload::Serve => {
            let mut m = CModule::load_on_device(path, device).map_err(not_script)?;
            m.f_set_eval().map_err(not_script)?;
            Script::Infer(m)
        }
        Workload::Train => {
            let m = TrainableCModule::load(path, vs.root()).map_err(not_script)?;
            if vs.trainable_variables().is_empty() {
                return Err(refuse(
                    path,
                    ModelFileProblem::NoParameters,
                    "it has no parameter that requires a gradient, so there is nothing to \
                     train; run it with --workload infer, or save it with trainable parameters",
                ));
            }
            Script::Train(m)
        }
    };
    check_forward(spec, &mut script, inputs)?;
    let model_file = ModelFile {
        sha256,
        input_shape: spec.input_shape,
        num_classes: spec.num_classes,
    };
    Ok((script, model_file))
}

/// One forward without autograd, in eval mode (training's module goes back to train mode
/// after), on the real batch: the module must take it and return `[batch, num_classes]`.
fn check_forward(
    spec: &TorchScriptSpec,
    script: &mut Script,
    inputs: &Tensor,
) -> Result<(), WorkloadError> {
    let path = spec.path.as_path();
    let [c, h, w] = spec.input_shape;
    let batch = inputs.size().first().copied().unwrap_or(0);
    let args = [IValue::Tensor(inputs.shallow_clone())];
    let out = match script {
        Script::Infer(m) => tch::no_grad(|| m.forward_is(&args)),
        Script::Train(m) => {
            m.f_set_eval()?;
            let out = tch::no_grad(|| m.forward_is(&args));
            m.f_set_train()?;
            out
        }
    };
    let out = out.map_err(|e| {
        let message = libtorch_message(e);
        if message.to_ascii_lowercase().contains("out of memory") {
            return WorkloadError::OutOfMemory(message);
        }
        refuse(
            path,
            ModelFileProblem::InputShape,
            format!(
                "its forward refused a batch of shape [{batch}, {c}, {h}, {w}] (--input-shape \
                 {c},{h},{w}); give the shape the model was exported for: {message}"
            ),
        )
    })?;
    let IValue::Tensor(logits) = out else {
        return Err(refuse(
            path,
            ModelFileProblem::OutputShape,
            format!(
                "its forward returned {}, not one tensor of logits; export a module whose \
                 forward returns [batch, classes]",
                ivalue_kind(&out)
            ),
        ));
    };
    let expected = [batch, i64::from(spec.num_classes)];
    if logits.size() != expected {
        return Err(refuse(
            path,
            ModelFileProblem::OutputShape,
            format!(
                "its forward returned a tensor of shape {:?} for a batch of {batch}; \
                 --num-classes {} expects {expected:?}",
                logits.size(),
                spec.num_classes
            ),
        ));
    }
    Ok(())
}

fn ivalue_kind(v: &IValue) -> &'static str {
    match v {
        IValue::None => "None",
        IValue::Tuple(_) => "a tuple",
        IValue::GenericList(_) | IValue::TensorList(_) => "a list",
        IValue::GenericDict(_) => "a dict",
        IValue::Tensor(_) => "a tensor",
        _ => "a non-tensor value",
    }
}
