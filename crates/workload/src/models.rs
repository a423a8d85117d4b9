//! The built-in models (`--model NAME`): the ImageNet classifiers that tch 0.24 ships in
//! `tch::vision`, each with 1000 classes and freshly initialized weights from the seed.
//!
//! A user deciding how to share a GPU cares about their own model: how much of the GPU one
//! process leaves idle decides whether MPS helps, and that depends on the model (a solo ResNet18
//! b32 training step keeps SM occupancy near 24 % on an H200; a larger model fills more). The list
//! holds the models that train and infer cleanly through tch at the worker's shapes; each has a
//! CPU test of its train and infer step and of its parameter count against torchvision's
//! (`tests/models.rs`). Left out: tch's AlexNet (its second convolution has stride 2 and
//! padding 1 where torchvision's has stride 1 and padding 2, so it is not the AlexNet users
//! know, and it refuses images below 127x127), the VGG family (its classifier is fixed to
//! 224x224 and holds 120M+ parameters), ConvMixer and the DINOv2 transformers (no class head in
//! tch).
//!
//! Some models only accept some image sizes; [`ZooModel::check_image_size`] says so before
//! anything is built, naming the sizes that work.

use std::fmt;
use std::str::FromStr;

use tch::nn::{ModuleT, Path};

use crate::error::WorkloadError;

/// A built-in model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ZooModel {
    /// ResNet-18 (11.7M parameters): the article's model and the default.
    #[default]
    Resnet18,
    /// ResNet-34 (21.8M parameters).
    Resnet34,
    /// ResNet-50 (25.6M parameters, bottleneck blocks).
    Resnet50,
    /// ResNet-101 (44.5M parameters).
    Resnet101,
    /// ResNet-152 (60.2M parameters).
    Resnet152,
    /// MobileNetV2 (3.5M parameters, depthwise convolutions: many small kernels).
    MobilenetV2,
    /// EfficientNet-B0 (5.3M parameters, depthwise convolutions and squeeze-excitation).
    EfficientnetB0,
    /// EfficientNet-B1 (7.8M parameters).
    EfficientnetB1,
    /// EfficientNet-B2 (9.1M parameters).
    EfficientnetB2,
    /// EfficientNet-B3 (12.2M parameters).
    EfficientnetB3,
    /// DenseNet-121 (8.0M parameters; its final pooling is fixed to 224x224 images).
    Densenet121,
    /// Inception v3 (23.8M parameters without the auxiliary head; images of at least 75x75).
    InceptionV3,
    /// SqueezeNet 1.1 (1.2M parameters).
    Squeezenet1_1,
}

/// The smallest square image every built-in model without a fixed size accepts here (the
/// worker's own lower bound).
pub const MIN_IMAGE_SIZE: u32 = 32;

impl ZooModel {
    /// Every built-in model, in the order `--help` lists them.
    pub const ALL: [ZooModel; 13] = [
        ZooModel::Resnet18,
        ZooModel::Resnet34,
        ZooModel::Resnet50,
        ZooModel::Resnet101,
        ZooModel::Resnet152,
        ZooModel::MobilenetV2,
        ZooModel::EfficientnetB0,
        ZooModel::EfficientnetB1,
        ZooModel::EfficientnetB2,
        ZooModel::EfficientnetB3,
        ZooModel::Densenet121,
        ZooModel::InceptionV3,
        ZooModel::Squeezenet1_1,
    ];

    /// The name used on the command line and recorded in `config.model`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ZooModel::Resnet18 => "resnet18",
            ZooModel::Resnet34 => "resnet34",
            ZooModel::Resnet50 => "resnet50",
            ZooModel::Resnet101 => "resnet101",
            ZooModel::Resnet152 => "resnet152",
            ZooModel::MobilenetV2 => "mobilenet_v2",
            ZooModel::EfficientnetB0 => "efficientnet_b0",
            ZooModel::EfficientnetB1 => "efficientnet_b1",
            ZooModel::EfficientnetB2 => "efficientnet_b2",
            ZooModel::EfficientnetB3 => "efficientnet_b3",
            ZooModel::Densenet121 => "densenet121",
            ZooModel::InceptionV3 => "inception_v3",
            ZooModel::Squeezenet1_1 => "squeezenet1_1",
        }
    }

    /// Every name, comma-separated (for messages and `--help`).
    #[must_use]
    pub fn names() -> String {
        ZooModel::ALL
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Refuses an image size the model cannot take, naming the sizes it can.
    pub fn check_image_size(self, image_size: u32) -> Result<(), WorkloadError> {
        let fits = match self {
            // Four stride-2 stages and a fixed 7x7 average pool: the last feature map must be
            // exactly 7x7.
            ZooModel::Densenet121 => (224..256).contains(&image_size),
            ZooModel::InceptionV3 => image_size >= 75,
            _ => image_size >= MIN_IMAGE_SIZE,
        };
        if fits {
            return Ok(());
        }
        let needs = match self {
            ZooModel::Densenet121 => "224 (224-255 give its fixed 7x7 final pooling)".to_owned(),
            ZooModel::InceptionV3 => "at least 75".to_owned(),
            _ => format!("at least {MIN_IMAGE_SIZE}"),
        };
        Err(WorkloadError::InvalidOption(format!(
            "{self} cannot take {image_size}x{image_size} images: its --image-size must be {needs}"
        )))
    }

    /// Builds the model's variables under `p` with `num_classes` outputs.
    pub(crate) fn build(self, p: &Path, num_classes: i64) -> Box<dyn ModuleT> {
        use tch::vision::{densenet, efficientnet, inception, mobilenet, resnet, squeezenet};
        match self {
            ZooModel::Resnet18 => Box::new(resnet::resnet18(p, num_classes)),
            ZooModel::Resnet34 => Box::new(resnet::resnet34(p, num_classes)),
            ZooModel::Resnet50 => Box::new(resnet::resnet50(p, num_classes)),
            ZooModel::Resnet101 => Box::new(resnet::resnet101(p, num_classes)),
            ZooModel::Resnet152 => Box::new(resnet::resnet152(p, num_classes)),
            ZooModel::MobilenetV2 => Box::new(mobilenet::v2(p, num_classes)),
            ZooModel::EfficientnetB0 => Box::new(efficientnet::b0(p, num_classes)),
            ZooModel::EfficientnetB1 => Box::new(efficientnet::b1(p, num_classes)),
            ZooModel::EfficientnetB2 => Box::new(efficientnet::b2(p, num_classes)),
            ZooModel::EfficientnetB3 => Box::new(efficientnet::b3(p, num_classes)),
            ZooModel::Densenet121 => Box::new(densenet::densenet121(p, num_classes)),
            ZooModel::InceptionV3 => Box::new(inception::v3(p, num_classes)),
            ZooModel::Squeezenet1_1 => Box::new(squeezenet::v1_1(p, num_classes)),
        }
    }
}

impl fmt::Display for ZooModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ZooModel {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ZooModel::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                WorkloadError::InvalidOption(format!(
                    "unknown model `{s}` (built-in models: {}; or give a TorchScript file with \
                     --model-file)",
                    ZooModel::names()
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for m in ZooModel::ALL {
            assert_eq!(m.as_str().parse::<ZooModel>().unwrap(), m);
        }
        let err = "resnet-18".parse::<ZooModel>().unwrap_err();
        assert_eq!(err.kind(), coload_cohort_schema::FailureKind::InvalidOption);
        assert!(err.to_string().contains("resnet-18"));
        assert!(err.to_string().contains("mobilenet_v2"));
        assert_eq!(ZooModel::default(), ZooModel::Resnet18);
    }

    #[test]
    fn image_sizes_a_model_cannot_take_are_refused_with_what_it_can() {
        assert!(ZooModel::Resnet18.check_image_size(32).is_ok());
        assert!(ZooModel::Densenet121.check_image_size(224).is_ok());
        let err = ZooModel::Densenet121.check_image_size(256).unwrap_err();
        assert!(
            err.to_string().contains("densenet121 cannot take 256x256"),
            "{err}"
        );
        assert!(ZooModel::InceptionV3.check_image_size(74).is_err());
        assert!(ZooModel::InceptionV3.check_image_size(75).is_ok());
        assert!(ZooModel::Resnet50.check_image_size(31).is_err());
    }
}
