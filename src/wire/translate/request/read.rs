//! Helpers shared by the request readers: typed access to JSON values with the field's path in
//! every error, image sources (data URLs, Anthropic `source`), fields dropped and reported,
//! and the per-target image checks both client formats need.

use serde_json::{Map, Value};

use crate::wire::translate::ir::{note, Image};
use crate::wire::translate::refusal::{Path, Result, TranslateError};
use crate::wire::translate::WireFormat;

pub(in crate::wire::translate) fn object(value: Value, at: Path) -> Result<Map<String, Value>> {
    match value {
        Value::Object(m) => Ok(m),
        other => Err(TranslateError::invalid(
            at,
            format!("must be a JSON object, not {}", kind(&other)),
        )),
    }
}

pub(in crate::wire::translate) fn array(value: Value, at: Path) -> Result<Vec<Value>> {
    match value {
        Value::Array(a) => Ok(a),
        other => Err(TranslateError::invalid(
            at,
            format!("must be an array, not {}", kind(&other)),
        )),
    }
}

pub(in crate::wire::translate) fn string(value: Value, at: Path) -> Result<String> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(TranslateError::invalid(
            at,
            format!("must be a string, not {}", kind(&other)),
        )),
    }
}

pub(in crate::wire::translate) fn boolean(value: &Value, at: Path) -> Result<bool> {
    value.as_bool().ok_or_else(|| {
        TranslateError::invalid(at, format!("must be true or false, not {}", kind(value)))
    })
}

pub(in crate::wire::translate) fn number(value: &Value, at: Path) -> Result<f64> {
    value.as_f64().ok_or_else(|| {
        TranslateError::invalid(at, format!("must be a number, not {}", kind(value)))
    })
}

pub(in crate::wire::translate) fn count(value: &Value, at: Path) -> Result<u64> {
    value.as_u64().ok_or_else(|| {
        TranslateError::invalid(
            at,
            format!("must be a non-negative integer, not {}", kind(value)),
        )
    })
}

pub(in crate::wire::translate) fn integer(value: &Value, at: Path) -> Result<i64> {
    value.as_i64().ok_or_else(|| {
        TranslateError::invalid(at, format!("must be an integer, not {}", kind(value)))
    })
}

/// A short name of the JSON type of `v`, for error messages.
pub(in crate::wire::translate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Take a required string field out of `m`.
pub(in crate::wire::translate) fn req_str(
    fields: &mut Map<String, Value>,
    key: &str,
    at: Path,
) -> Result<String> {
    match fields.remove(key) {
        Some(v) if !v.is_null() => string(v, at.key(key)),
        _ => Err(TranslateError::invalid(at.key(key), "is required")),
    }
}

/// Take an optional string field out of `m` (`null` counts as absent).
pub(in crate::wire::translate) fn opt_str(
    fields: &mut Map<String, Value>,
    key: &str,
    at: Path,
) -> Result<Option<String>> {
    match fields.remove(key) {
        Some(v) if !v.is_null() => string(v, at.key(key)).map(Some),
        _ => Ok(None),
    }
}

/// The error for a field `target` cannot express.
pub(in crate::wire::translate) fn refuse(
    at: Path,
    target: WireFormat,
    what: &str,
) -> TranslateError {
    TranslateError::unsupported(
        at,
        format!(
            "{what} cannot be expressed in {}; remove it, or route this model to a channel \
             that speaks the client's format",
            target.name()
        ),
    )
}

/// The error for a field this reader does not know.
pub(in crate::wire::translate) fn unknown(at: Path, target: WireFormat) -> TranslateError {
    TranslateError::unsupported(
        at,
        format!(
            "is not a field the translation to {} knows; remove it, or route this model to a \
             channel that speaks the client's format",
            target.name()
        ),
    )
}

/// Refuse any key left in `m` (every known key was taken out already); `ignored` keys pass,
/// and so does any key whose value is `null`: both APIs read a null optional field as an
/// absent one, and the SDKs echo unset fields of earlier answers as null (`toolset_name`).
pub(in crate::wire::translate) fn no_more(
    fields: &Map<String, Value>,
    at: Path,
    target: WireFormat,
    ignored: &[&str],
) -> Result<()> {
    let left = fields
        .iter()
        .find(|(k, v)| !v.is_null() && !ignored.contains(&k.as_str()));
    match left.map(|(k, _)| k) {
        Some(k) => Err(unknown(at.key(k), target)),
        None => Ok(()),
    }
}

/// Anthropic block fields that only steer its prompt cache or carry citations of earlier
/// answers: dropped and reported towards the other formats (which cache implicitly).
pub(in crate::wire::translate) const BLOCK_DROPPED: &[(&str, &str)] = &[
    ("cache_control", "cache_control"),
    ("citations", "citations"),
];

/// Take the `(key, reported name)` fields out of `m`; each one that is not `null` is noted in
/// `dropped` under its reported name.
pub(in crate::wire::translate) fn drop_keys(
    fields: &mut Map<String, Value>,
    keys: &[(&str, &'static str)],
    dropped: &mut Vec<&'static str>,
) {
    for &(key, name) in keys {
        if fields.remove(key).is_some_and(|v| !v.is_null()) {
            note(dropped, name);
        }
    }
}

/// An image from an OpenAI `image_url.url`: a `data:` URL with base64 data, or a URL.
pub(in crate::wire::translate) fn image_from_url(url: String, at: Path) -> Result<Image> {
    let Some(rest) = url.strip_prefix("data:") else {
        return Ok(Image::Url(url));
    };
    let Some((meta, data)) = rest.split_once(',') else {
        return Err(TranslateError::invalid(at, "is a data URL without a `,`"));
    };
    let Some(media_type) = meta.strip_suffix(";base64") else {
        return Err(TranslateError::unsupported(
            at,
            "is a data URL that is not base64-encoded; send `data:<type>;base64,<data>`",
        ));
    };
    Ok(Image::Base64 {
        media_type: media_type.to_string(),
        data: data.to_string(),
    })
}

/// Media types Anthropic accepts for base64 images.
const ANTHROPIC_IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// URLs Gemini's `fileData.fileUri` accepts: files uploaded with its Files API.
pub(in crate::wire::translate) const GEMINI_FILES_PREFIX: &str =
    "https://generativelanguage.googleapis.com/";

/// Refuse an image `target` cannot take in this form.
pub(in crate::wire::translate) fn check_image(
    img: &Image,
    at: Path,
    target: WireFormat,
) -> Result<()> {
    match (img, target) {
        (Image::Base64 { media_type, .. }, WireFormat::Anthropic)
            if !ANTHROPIC_IMAGE_TYPES.contains(&media_type.as_str()) =>
        {
            Err(TranslateError::unsupported(
                at,
                format!(
                    "has media type `{media_type}`; Anthropic Messages accepts only {}",
                    ANTHROPIC_IMAGE_TYPES.join(", ")
                ),
            ))
        }
        (Image::Url(u), WireFormat::Gemini) if !u.starts_with(GEMINI_FILES_PREFIX) => {
            Err(TranslateError::unsupported(
                at,
                "is an image URL; Gemini takes images inline (base64) or as Files API uploads, \
                 and the gateway does not fetch URLs: send the image as a base64 data URL",
            ))
        }
        (Image::Url(u), WireFormat::OpenAi | WireFormat::Anthropic)
            if !(u.starts_with("https://") || u.starts_with("http://")) =>
        {
            Err(TranslateError::invalid(
                at,
                "must be an http(s) URL or a base64 data URL",
            ))
        }
        _ => Ok(()),
    }
}
