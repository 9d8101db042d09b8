//! YAML text → JSON tree, plus the line of every key path (serde-saphyr's `Spanned`), so a
//! validation error can name the line it is about; YAML syntax errors are reworded with
//! their line and column and without parser-library jargon (R2.3).

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::{MessageFormatter, Spanned, UserMessageFormatter};

use crate::config::load::sections::join;

/// The line (1-based) where each key path of the file is written.
#[derive(Debug, Default, Clone)]
pub(crate) struct Lines(HashMap<String, u32>);

impl Lines {
    /// The line of `key`, or of its nearest ancestor written in the file.
    pub(crate) fn line_of(&self, key: &str) -> Option<u32> {
        let mut ancestor = key;
        loop {
            if let Some(line) = self.0.get(ancestor) {
                return Some(*line);
            }
            let cut = ancestor.rfind(['.', '['])?;
            ancestor = &ancestor[..cut];
        }
    }
}

/// A YAML syntax error: where, and what is wrong in plain words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub line: Option<u32>,
    pub reason: String,
}

/// One YAML node with its value; map keys keep their own location.
enum Node {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<String>, Spanned<Node>)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Node, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Node, E> {
        Ok(Node::Bool(value))
    }
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Node, E> {
        Ok(Node::Int(value))
    }
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Node, E> {
        Ok(Node::UInt(value))
    }
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Node, E> {
        Ok(Node::Float(value))
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<Node, E> {
        Ok(Node::Str(value.to_string()))
    }
    fn visit_string<E: de::Error>(self, value: String) -> Result<Node, E> {
        Ok(Node::Str(value))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        Node::deserialize(deserializer)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            out.push(item);
        }
        Ok(Node::Seq(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut out = Vec::new();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value::<Spanned<Node>>()?;
            out.push((key, value));
        }
        Ok(Node::Map(out))
    }
}

fn line(location: &serde_saphyr::Location) -> Option<u32> {
    u32::try_from(location.line())
        .ok()
        .filter(|number| *number > 0)
}

fn convert(node: Node, path: &str, lines: &mut Lines) -> Value {
    match node {
        Node::Null => Value::Null,
        Node::Bool(boolean) => Value::Bool(boolean),
        Node::Int(int) => Value::Number(int.into()),
        Node::UInt(uint) => Value::Number(uint.into()),
        Node::Float(float) => Number::from_f64(float).map_or(Value::Null, Value::Number),
        Node::Str(string) => Value::String(string),
        Node::Seq(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| {
                    let item_path = format!("{path}[{i}]");
                    if let Some(lineno) = line(&item.referenced) {
                        lines.0.entry(item_path.clone()).or_insert(lineno);
                    }
                    convert(item.value, &item_path, lines)
                })
                .collect(),
        ),
        Node::Map(entries) => {
            let mut object = Map::new();
            for (key, value_node) in entries {
                let key_path = join(path, &key.value);
                if let Some(lineno) = line(&key.referenced).or_else(|| line(&value_node.referenced))
                {
                    lines.0.entry(key_path.clone()).or_insert(lineno);
                }
                let value = convert(value_node.value, &key_path, lines);
                object.insert(key.value, value);
            }
            Value::Object(object)
        }
    }
}

/// Parse `text` (already interpolated) into a tree and its line index.
pub(crate) fn parse(text: &str) -> Result<(Value, Lines), SyntaxError> {
    let node: Spanned<Node> = serde_saphyr::from_str(text).map_err(|e| reword(&e))?;
    let mut lines = Lines::default();
    let tree = convert(node.value, "", &mut lines);
    Ok((tree, lines))
}

/// A parser error in the config's own terms, with its line and column.
fn reword(error: &serde_saphyr::Error) -> SyntaxError {
    let loc = error.location();
    let lineno = loc.as_ref().and_then(line);
    let col = loc
        .map(|location| location.column())
        .filter(|column| *column > 0);
    let what = match error.without_snippet() {
        serde_saphyr::Error::DuplicateMappingKey { key: Some(key), .. } => {
            format!("key {key:?} is written twice in the same mapping; keep one of them")
        }
        serde_saphyr::Error::DuplicateMappingKey { key: None, .. } => {
            "a key is written twice in the same mapping; keep one of them".to_string()
        }
        serde_saphyr::Error::MultipleDocuments { .. } => {
            "the file holds more than one YAML document (a `---` line); keep one".to_string()
        }
        other => {
            let msg = UserMessageFormatter.format_message(other);
            let msg: String = msg
                .chars()
                .map(|character| {
                    if character.is_control() {
                        ' '
                    } else {
                        character
                    }
                })
                .collect();
            format!("not valid YAML: {msg}")
        }
    };
    let reason = match col {
        Some(column) => format!("column {column}: {what}"),
        None => what,
    };
    SyntaxError {
        line: lineno,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_path_has_its_line() {
        let text = "a: 1\nchannels:\n  mock-b:\n    weight: 5\n    groups: [x, y]\n  flow: {k: v, n: 3}\nlist:\n  - one\n  - two: 2\n";
        let (tree, lines) = parse(text).unwrap();
        assert_eq!(tree["channels"]["mock-b"]["weight"], 5);
        assert_eq!(lines.line_of("a"), Some(1));
        assert_eq!(lines.line_of("channels.mock-b"), Some(3));
        assert_eq!(lines.line_of("channels.mock-b.weight"), Some(4));
        assert_eq!(lines.line_of("channels.mock-b.groups[1]"), Some(5));
        assert_eq!(lines.line_of("channels.flow.n"), Some(6));
        assert_eq!(lines.line_of("list[1].two"), Some(9));
        // a key that is not written falls back to its nearest written ancestor
        assert_eq!(lines.line_of("channels.mock-b.base_url"), Some(3));
        assert_eq!(lines.line_of("nowhere"), None);
    }

    #[test]
    fn numbers_keys_and_floats_keep_their_types() {
        let (tree, _) = parse("m: {429: 503}\nf: 0.5\nneg: -3\ns: '7'\nb: true\nn: ~\n").unwrap();
        assert_eq!(tree["m"]["429"], 503);
        assert_eq!(tree["f"], 0.5);
        assert_eq!(tree["neg"], -3);
        assert_eq!(tree["s"], "7");
        assert_eq!(tree["b"], true);
        assert!(tree["n"].is_null());
    }

    #[test]
    fn parser_errors_speak_the_configs_language() {
        let error = parse("a: 1\nchannels:\n  x: 1\n  x: 2\n").unwrap_err();
        assert_eq!(error.line, Some(4), "{error:?}");
        assert!(error.reason.contains("\"x\" is written twice"), "{error:?}");
        assert!(error.reason.starts_with("column 3: "), "{error:?}");
        assert!(!error.reason.contains("DuplicateKeyPolicy"), "{error:?}");
        let error = parse("channels:\n  a: [unclosed\n").unwrap_err();
        assert!(error.line.is_some(), "{error:?}");
        assert!(error.reason.starts_with("column "), "{error:?}");
        assert!(!error.reason.contains("<input>"), "{error:?}");
    }
}
