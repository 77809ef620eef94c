//! Image blocks, for an agent that takes image prompts.
//!
//! In the trace every image is the placeholder `[image]`, wherever it is (a message or a tool
//! result) and whether or not it is attached: the trace's text, and so the history identity,
//! does not depend on which prompt an image was sent with. The images themselves go with the
//! prompt as separate blocks, in the order they appear: the most recent `max_images` of the
//! messages the prompt carries, each at most `max_image_bytes` once decoded. Only base64
//! images of the four types the Messages API accepts are attached; a `url` image stays a
//! placeholder (the agent fetches nothing for the client).

use devin_bridge_types::{Failure, Image, ImageLimits};

use crate::failure::{fail, quote, INVALID_CONTENT_BLOCK};
use crate::json::Json;

/// What an image becomes in the trace.
pub(crate) const PLACEHOLDER: &str = "[image]";

/// Media types an attached image may have.
const MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// An image block found in message `message`, if it can be attached.
pub(crate) struct Found<'a> {
    pub message: usize,
    media_type: &'a str,
    data: &'a str,
    decoded_bytes: usize,
}

/// Checks an image block at `at` (its `source`) and, when it can be attached, returns it.
pub(crate) fn read<'a>(
    at: &str,
    message: usize,
    block: &'a Json,
) -> Result<Option<Found<'a>>, Failure> {
    let invalid = |what: &str| fail(INVALID_CONTENT_BLOCK, format!("{at} is an image {what}"));
    let Some(source) = block
        .field("source")
        .filter(|s| matches!(s, Json::Object(_)))
    else {
        return Err(invalid("without a source object"));
    };
    match source.str_field("type") {
        Some("base64") => {}
        Some("url") => return Ok(None),
        Some(other) => {
            return Err(invalid(&format!(
                "with the unsupported source type {}",
                quote(other)
            )))
        }
        None => return Err(invalid("whose source has no string type")),
    }
    let media_type = source
        .str_field("media_type")
        .ok_or_else(|| invalid("whose source has no string media_type"))?;
    if !MEDIA_TYPES.contains(&media_type) {
        return Err(invalid(&format!(
            "of type {} (only png, jpeg, gif and webp are accepted)",
            quote(media_type)
        )));
    }
    let data = source
        .str_field("data")
        .ok_or_else(|| invalid("whose source has no string data"))?;
    let decoded_bytes = base64_len(data).ok_or_else(|| invalid("whose data is not base64"))?;
    Ok(Some(Found {
        message,
        media_type,
        data,
        decoded_bytes,
    }))
}

/// The decoded length of standard base64 text (padded), or `None` when it is not base64.
fn base64_len(data: &str) -> Option<usize> {
    let bytes = data.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let padding = bytes.iter().rev().take_while(|&&b| b == b'=').count();
    if padding > 2 {
        return None;
    }
    let body = &bytes[..bytes.len() - padding];
    if !body
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
    {
        return None;
    }
    Some(bytes.len() / 4 * 3 - padding)
}

/// The images to attach for a prompt that carries the messages from `first_message` on.
pub(crate) fn attach(found: &[Found<'_>], first_message: usize, limits: ImageLimits) -> Vec<Image> {
    let max_images = usize::try_from(limits.max_images).unwrap_or(usize::MAX);
    let max_bytes = usize::try_from(limits.max_image_bytes).unwrap_or(usize::MAX);
    let carried: Vec<&Found<'_>> = found
        .iter()
        .filter(|image| image.message >= first_message)
        .collect();
    let recent = &carried[carried.len().saturating_sub(max_images)..];
    recent
        .iter()
        .filter(|image| image.decoded_bytes <= max_bytes)
        .map(|image| Image {
            media_type: image.media_type.to_owned(),
            data: image.data.to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_len(""), Some(0));
        assert_eq!(base64_len("AAAA"), Some(3));
        assert_eq!(base64_len("AAA="), Some(2));
        assert_eq!(base64_len("AA=="), Some(1));
        assert_eq!(base64_len("A==="), None);
        assert_eq!(base64_len("AAA"), None);
        assert_eq!(base64_len("AA*A"), None);
        assert_eq!(base64_len("A=AA"), None);
    }
}
