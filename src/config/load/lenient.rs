//! A forgiving deserializer over the merged JSON tree: environment values arrive as
//! strings, so a string is accepted where a number or bool is wanted (and a number where
//! a string is wanted). Everything else is strict; unknown fields stay errors, worded in
//! the config's own terms (`DeError`) rather than Rust's (`expected i64`).

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::Value;

type Error = DeError;

/// A deserialization problem, already phrased for the person editing the file.
#[derive(Debug)]
pub(crate) struct DeError(String);

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeError {}

/// What a Rust type expects, in the config's terms.
fn expected(exp: &dyn de::Expected) -> String {
    let rust_type = exp.to_string();
    match rust_type.as_str() {
        "i8" | "i16" | "i32" | "i64" => "a whole number".into(),
        "u8" => "a whole number from 0 to 255".into(),
        "u16" => "a whole number from 0 to 65535".into(),
        "u32" => "a whole number from 0 to 4294967295".into(),
        "u64" | "usize" => "a whole number, 0 or more".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a string" => "text".into(),
        "a sequence" => "a list, such as [a, b]".into(),
        "a map" => "a mapping of `name: value` entries".into(),
        _ if rust_type.starts_with("struct ") => "a mapping of settings".into(),
        _ => rust_type,
    }
}

/// What was found, as it is written in YAML.
fn found(unexpected: de::Unexpected<'_>) -> String {
    use de::Unexpected as U;
    match unexpected {
        U::Bool(boolean) => boolean.to_string(),
        U::Unsigned(number) => number.to_string(),
        U::Signed(number) => number.to_string(),
        U::Float(float) => float.to_string(),
        U::Str(text) => format!("{text:?}"),
        U::Unit => "an empty value".into(),
        U::Seq => "a list".into(),
        U::Map => "a mapping".into(),
        other => other.to_string(),
    }
}

/// `word` misspelled from one of `names`?
pub(crate) fn did_you_mean<'a>(word: &str, names: &[&'a str]) -> Option<&'a str> {
    names
        .iter()
        .map(|name| (strsim::damerau_levenshtein(word, name), *name))
        .filter(|(distance, name)| *distance <= (name.len() / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// `unknown key "x"; did you mean "y"? The keys here are: …`.
pub(crate) fn unknown_key(word: &str, names: &[&str]) -> String {
    let hint = did_you_mean(word, names)
        .map(|suggestion| format!("did you mean {suggestion:?}? "))
        .unwrap_or_default();
    if names.is_empty() {
        return format!("unknown key {word:?}; nothing can be set here");
    }
    format!(
        "unknown key {word:?}; {hint}the keys here are: {}",
        names.join(", ")
    )
}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError(msg.to_string())
    }
    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        DeError(format!(
            "expected {}, found {}",
            expected(exp),
            found(unexp)
        ))
    }
    fn invalid_value(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        DeError(format!("{} is not {}", found(unexp), expected(exp)))
    }
    fn invalid_length(len: usize, exp: &dyn de::Expected) -> Self {
        DeError(format!("{len} items is not {}", expected(exp)))
    }
    fn unknown_variant(variant: &str, names: &'static [&'static str]) -> Self {
        DeError(format!("{variant:?} is not one of {}", names.join(", ")))
    }
    fn unknown_field(field: &str, names: &'static [&'static str]) -> Self {
        DeError(unknown_key(field, names))
    }
    fn missing_field(field: &'static str) -> Self {
        DeError(format!("required key {field:?} is missing"))
    }
    fn duplicate_field(field: &'static str) -> Self {
        DeError(format!("key {field:?} is given twice"))
    }
}

/// A node of the tree: a value, or a map key (always text).
#[derive(Clone, Copy)]
pub(crate) enum Lenient<'a> {
    Value(&'a Value),
    Key(&'a str),
}

impl<'a> Lenient<'a> {
    fn text(self) -> Option<&'a str> {
        match self {
            Lenient::Value(Value::String(string)) => Some(string.trim_matches(' ')),
            Lenient::Key(key) => Some(key.trim_matches(' ')),
            _ => None,
        }
    }
}

macro_rules! int_method {
    ($method:ident, $ty:ty, $visit:ident) => {
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            match self.text() {
                Some(text) => match text.parse::<$ty>() {
                    Ok(number) => visitor.$visit(number),
                    Err(_) => Err(de::Error::invalid_value(
                        de::Unexpected::Str(text),
                        &visitor,
                    )),
                },
                None => self.deserialize_any(visitor),
            }
        }
    };
}

impl<'de, 'a> de::Deserializer<'de> for Lenient<'a> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Lenient::Key(key) => visitor.visit_str(key),
            Lenient::Value(value) => match value {
                Value::Null => visitor.visit_unit(),
                Value::Bool(boolean) => visitor.visit_bool(*boolean),
                Value::Number(number) => {
                    if let Some(unsigned) = number.as_u64() {
                        visitor.visit_u64(unsigned)
                    } else if let Some(signed) = number.as_i64() {
                        visitor.visit_i64(signed)
                    } else {
                        visitor.visit_f64(number.as_f64().unwrap_or(f64::NAN))
                    }
                }
                Value::String(string) => visitor.visit_str(string),
                Value::Array(items) => visitor.visit_seq(Seq { iter: items.iter() }),
                Value::Object(map) => visitor.visit_map(Map {
                    iter: map.iter(),
                    value: None,
                }),
            },
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.text() {
            Some(text) if text.eq_ignore_ascii_case("true") => visitor.visit_bool(true),
            Some(text) if text.eq_ignore_ascii_case("false") => visitor.visit_bool(false),
            Some(text) => Err(de::Error::invalid_value(
                de::Unexpected::Str(text),
                &visitor,
            )),
            None => self.deserialize_any(visitor),
        }
    }

    int_method!(deserialize_i8, i8, visit_i8);
    int_method!(deserialize_i16, i16, visit_i16);
    int_method!(deserialize_i32, i32, visit_i32);
    int_method!(deserialize_i64, i64, visit_i64);
    int_method!(deserialize_u8, u8, visit_u8);
    int_method!(deserialize_u16, u16, visit_u16);
    int_method!(deserialize_u32, u32, visit_u32);
    int_method!(deserialize_u64, u64, visit_u64);
    int_method!(deserialize_f32, f32, visit_f32);
    int_method!(deserialize_f64, f64, visit_f64);

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Lenient::Value(Value::Number(number)) => visitor.visit_string(number.to_string()),
            Lenient::Value(Value::Bool(boolean)) => visitor.visit_string(boolean.to_string()),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Lenient::Value(Value::Null) => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.text() {
            Some(text) => visitor.visit_enum(text.into_deserializer()),
            None => Err(de::Error::custom("expected a string")),
        }
    }

    forward_to_deserialize_any! {
        char bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

struct Seq<'a> {
    iter: std::slice::Iter<'a, Value>,
}

impl<'de, 'a> SeqAccess<'de> for Seq<'a> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        match self.iter.next() {
            Some(item) => seed.deserialize(Lenient::Value(item)).map(Some),
            None => Ok(None),
        }
    }
}

struct Map<'a> {
    iter: serde_json::map::Iter<'a>,
    value: Option<&'a Value>,
}

impl<'de, 'a> MapAccess<'de> for Map<'a> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.iter.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(Lenient::Key(key)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(Lenient::Value(value)),
            None => Err(de::Error::custom("value missing")),
        }
    }
}

/// Deserialize `value` into `T`; on failure return the dotted key path (relative to
/// `value`) and the reason.
pub(crate) fn from_value<T: de::DeserializeOwned>(value: &Value) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(Lenient::Value(value)).map_err(|error| {
        let path = error.path().to_string();
        let path = if path == "." { String::new() } else { path };
        (path, error.into_inner().to_string())
    })
}
