//! Tolerant readers for single JSON fields: a number that may be of the wrong type, the
//! length of an array that may not be one, an object that may not be one. None allocates
//! or fails the whole document.

use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// A number that is kept only when it is a u64; any other JSON value reads as `None`
/// instead of failing the whole body (the same leniency as `Value::as_u64`).
#[derive(Default, Clone, Copy)]
pub struct Lenient(pub Option<u64>);

impl<'de> Deserialize<'de> for Lenient {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Lenient;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Lenient, E> {
                Ok(Lenient(Some(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Lenient, E> {
                Ok(Lenient(u64::try_from(v).ok()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_unit<E>(self) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_none<E>(self) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Lenient, D2::Error> {
                Lenient::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Lenient, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Lenient, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// The number of elements of an array; any other JSON value counts 0.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Count(pub usize);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Count;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while a.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Count, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Count(0))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_str<E>(self, _: &str) -> Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_unit<E>(self) -> Result<Count, E> {
                Ok(Count(0))
            }
        }
        d.deserialize_any(V)
    }
}

/// An object read as `T` (whose fields must be tolerant themselves); any other JSON value
/// reads as `None` instead of failing the whole document (like `Value::is_object`).
pub struct Object<T>(pub Option<T>);

impl<T> Default for Object<T> {
    fn default() -> Self {
        Object(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Object<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(a)).map(|t| Object(Some(t)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Object<T>, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Object(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Object<T>, E> {
                Ok(Object(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Object<T>, E> {
                Ok(Object(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Object<T>, E> {
                Ok(Object(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Object<T>, E> {
                Ok(Object(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Object<T>, E> {
                Ok(Object(None))
            }
            fn visit_unit<E>(self) -> Result<Object<T>, E> {
                Ok(Object(None))
            }
            fn visit_none<E>(self) -> Result<Object<T>, E> {
                Ok(Object(None))
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Object<T>, D2::Error> {
                Object::deserialize(d)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerant_readers() {
        let lenient = |s: &str| serde_json::from_str::<Lenient>(s).unwrap().0;
        assert_eq!(lenient("7"), Some(7));
        assert_eq!(lenient("-1"), None);
        assert_eq!(lenient("1.5"), None);
        assert_eq!(lenient(r#""7""#), None);
        assert_eq!(lenient(r#"{"a":[1]}"#), None);
        let count = |s: &str| serde_json::from_str::<Count>(s).unwrap().0;
        assert_eq!(count("[1,{\"a\":2},[3]]"), 3);
        assert_eq!(count("[]"), 0);
        assert_eq!(count(r#""a string""#), 0);
        assert_eq!(count(r#"{"x":[1,2]}"#), 0);
        assert_eq!(count("null"), 0);
        #[derive(Deserialize)]
        struct N {
            #[serde(default)]
            n: Lenient,
        }
        let object = |s: &str| {
            serde_json::from_str::<Object<N>>(s)
                .unwrap()
                .0
                .map(|x| x.n.0)
        };
        assert_eq!(object(r#"{"n":3,"x":[1]}"#), Some(Some(3)));
        assert_eq!(object(r#"{"n":"3"}"#), Some(None));
        for other in ["3", r#""s""#, "[1,{}]", "null", "true"] {
            assert_eq!(object(other), None, "{other}");
        }
        // The same reading from an already parsed value.
        let parsed: serde_json::Value = serde_json::from_str(r#"{"n":7}"#).unwrap();
        assert_eq!(
            Object::<N>::deserialize(&parsed).unwrap().0.map(|x| x.n.0),
            Some(Some(7))
        );
    }
}
