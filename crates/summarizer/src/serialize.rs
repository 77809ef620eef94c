//! The serializer and model-alias steps of a request: a whole request, only what a resident
//! session has not seen, or the continuation of a session's last request, with the checks it
//! needs (nothing, the model, or the model and its context window), in one hop off the async
//! workers.
//!
//! Every `serialize-*` call of the summarizer runs here, for either transport: the per-turn
//! path and the resident sessions call these functions, never the serializer themselves.

use std::sync::Arc;

use devin_bridge_engine::{
    Image, PromptOptions, Resume, ResumedPrompt, TransformCalls as _, UnseenPrompt,
};
use devin_bridge_types::Failure;

use devin_bridge_engine::{ImageLimits, Transforms};

use super::calls::run_transform;
use super::catalog::Catalogs;
use super::window;

/// What serializing a request needs, and nothing else of the bridge: the transforms, the
/// catalog in force, the context windows of its models and the images a prompt takes.
pub(crate) struct Codec {
    pub(crate) transforms: Arc<Transforms>,
    pub(crate) catalogs: Catalogs,
    /// The context windows of the catalog in force.
    pub(crate) windows: Arc<window::ModelWindows>,
    /// Which images go with a prompt: none unless the agent advertises image prompts.
    pub(crate) images: ImageLimits,
}

impl Codec {
    /// The model catalog in force now.
    pub(crate) fn catalog(&self) -> String {
        self.catalogs.current()
    }
}

/// The whole prompt and its images, admitted: model validated, input within its window.
pub(crate) async fn serialize_whole(
    codec: &Codec,
    body: String,
) -> Result<(UnseenPrompt, Option<String>), Failure> {
    serialize_unseen(codec, Arc::new(body), 0, Check::Admit).await
}

/// What a serialization checks besides the request itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// Nothing more (the request was admitted before).
    Nothing,
    /// The model names a catalog entry.
    Model,
    /// The model, and the input estimate within the model's context window.
    Admit,
}

/// `serialize-unseen` for a session holding `held` messages (with the images the agent
/// takes), and the `check` on the result: the transforms in one hop off the async workers.
/// With a model check, also the ACP model id the request's model resolved to.
pub(super) async fn serialize_unseen(
    codec: &Codec,
    body: Arc<String>,
    held: u32,
    check: Check,
) -> Result<(UnseenPrompt, Option<String>), Failure> {
    let catalog = codec.catalog();
    let windows = codec.windows.clone();
    let options = PromptOptions {
        held,
        images: codec.images,
    };
    run_transform(&codec.transforms, body.len(), move |t| {
        let unseen = match t.serialize_unseen(body, options)? {
            Ok(unseen) => unseen,
            Err(failure) => return Ok(Err(failure)),
        };
        let model = unseen.prompt.model.clone();
        let checked = match check {
            Check::Nothing => Ok(None),
            Check::Model => t.validate_model(model, catalog)?.map(Some),
            Check::Admit => {
                window::admit(t, &windows, model, catalog, unseen.prompt.input_tokens)?.map(Some)
            }
        };
        Ok(checked.map(|model_id| (unseen, model_id)))
    })
    .await?
}

/// `serialize-resumed`: the continuation of a resident session's last request, for a session
/// holding `held` messages, admitted on the earlier request's `model` (the model lies outside
/// the messages, so the continuation repeats it): the prompt and the ACP model id. None when
/// the serializer refuses the continuation (then serializing the whole request decides).
pub(crate) async fn serialize_resumed(
    codec: &Codec,
    continuation: String,
    resume: Resume,
    held: u32,
    model: String,
) -> Result<Option<(ResumedPrompt, String)>, Failure> {
    let (catalog, windows) = (codec.catalog(), codec.windows.clone());
    let options = PromptOptions {
        held,
        images: codec.images,
    };
    let size = continuation.len();
    let answer = run_transform(&codec.transforms, size, move |t| {
        Ok(match t.serialize_resumed(continuation, resume, options)? {
            Ok(resumed) => {
                let tokens = resumed.input_tokens;
                Some(window::admit(t, &windows, model, catalog, tokens)?.map(|id| (resumed, id)))
            }
            Err(failure) => {
                tracing::debug!(code = %failure.code, "the continuation was refused; serializing the whole request");
                None
            }
        })
    })
    .await?;
    answer.transpose()
}

/// The ACP model id a request's (already validated) model resolves to.
pub(super) async fn resolve_model(codec: &Codec, model: &str) -> Result<String, Failure> {
    let (model, catalog) = (model.to_owned(), codec.catalog());
    run_transform(&codec.transforms, model.len(), move |t| {
        t.validate_model(model, catalog)
    })
    .await?
}

/// `count_tokens`: the serializer's estimate of everything the request would send the agent,
/// with the model validated. A request over its model's window is counted, not refused.
pub(crate) async fn count_tokens(codec: &Codec, body: String) -> Result<u32, Failure> {
    serialize_unseen(codec, Arc::new(body), 0, Check::Model)
        .await
        .map(|(unseen, _)| unseen.prompt.input_tokens)
}

/// An image as the ACP prompt builder takes it: (media type, base64 data).
pub(super) fn image_parts(images: &[Image]) -> impl Iterator<Item = (&str, &str)> {
    images
        .iter()
        .map(|image| (image.media_type.as_str(), image.data.as_str()))
}
