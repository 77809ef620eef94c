//! The failures of this transform, one constructor per code.
//!
//! Everything a caller can get wrong is a 400; only a broken catalog is a 500, because the
//! catalog is the operator's configuration, not client input. Nothing here is repairable:
//! repairs are for agent output. Messages echo caller input only through `names::echo`.

use crate::names::echo;
use devin_bridge_types::Failure;

pub(crate) fn missing_prefix(reference: &str) -> Failure {
    Failure::invalid(
        "missing_model_prefix",
        format!(
            "model `{}` must be written as `{}<model id>`",
            echo(reference),
            crate::names::PREFIX
        ),
    )
}

pub(crate) fn empty_model() -> Failure {
    Failure::invalid("unknown_model", "no model was named")
}

pub(crate) fn unknown_model(requested: &str) -> Failure {
    Failure::invalid(
        "unknown_model",
        format!("model `{}` is not in the model catalog", echo(requested)),
    )
}

pub(crate) fn family_without_variants(requested: &str, family: &str) -> Failure {
    Failure::invalid(
        "unknown_model",
        format!(
            "model `{}` names the family `{}`, which has no variants in the model catalog",
            echo(requested),
            echo(family)
        ),
    )
}

pub(crate) fn ambiguous(requested: &str, candidates: &[String]) -> Failure {
    Failure::invalid(
        "ambiguous_model",
        format!(
            "model `{}` matches several catalog entries ({}); name one variant exactly",
            echo(requested),
            candidates.join(", ")
        ),
    )
}

pub(crate) fn routing_pairing(requested: &str) -> Failure {
    Failure::invalid(
        "unsupported_model",
        format!(
            "model `{}` is a routing pairing, not a model; name a model family or variant",
            echo(requested)
        ),
    )
}

pub(crate) fn invalid_catalog(detail: impl std::fmt::Display) -> Failure {
    Failure {
        code: "invalid_catalog".to_owned(),
        message: format!("the model catalog is invalid: {detail}"),
        status: 500,
        repairable: false,
    }
}

pub(crate) fn unknown_setting(name: &str, known: &[&str]) -> Failure {
    Failure::invalid(
        "unknown_model_setting",
        format!(
            "`{}` is not a model setting; expected one of {}",
            echo(name),
            known.join(", ")
        ),
    )
}

pub(crate) fn empty_setting(name: &str) -> Failure {
    Failure::invalid("empty_model_setting", format!("`{name}` is empty"))
}

pub(crate) fn duplicate_setting(name: &str) -> Failure {
    Failure::invalid(
        "duplicate_model_setting",
        format!("`{name}` is given more than once"),
    )
}

/// A setting whose value did not validate keeps that failure's code, status and wording,
/// and says which setting it was.
pub(crate) fn in_setting(name: &str, failure: Failure) -> Failure {
    Failure {
        message: format!("`{name}`: {}", failure.message),
        ..failure
    }
}

/// A rendering step that cannot fail did; reported as a server error, never a panic.
pub(crate) fn internal(detail: impl std::fmt::Display) -> Failure {
    Failure {
        code: "internal_error".to_owned(),
        message: format!("the model list could not be rendered: {detail}"),
        status: 500,
        repairable: false,
    }
}
