//! The gateway's own estimate of a request body's input tokens: used where no upstream can
//! count them (`/v1/messages/count_tokens` on a group with no Anthropic channel) and for
//! admission (precharge, `tpm` reservations). One pass over the JSON text, no parse tree.
//!
//! The method (README "Token estimates"):
//! - Text, in every JSON string and key: ASCII counts a token per 4 characters; CJK (Han,
//!   kana, Hangul, full-width forms) a token per character; any other script a token per 2
//!   characters. Numbers and punctuation between strings count a token per 8 bytes.
//! - Images (base64 inside a `data:` URL or an Anthropic `source.data`, recognised by their
//!   magic bytes): Anthropic's documented rule, `width * height / 750` after scaling the image
//!   to fit 1568 px on its long edge and 1.15 megapixels, so at most ~1,600 per image; an image
//!   whose size cannot be read counts 1,600.
//! - Audio: a token per 1,600 decoded bytes (about 10 a second at 128 kbit/s). Documents and
//!   other base64 payloads (PDF, files): a token per 32 decoded bytes.
//!
//! No estimate is exact; this one errs high for text (real tokenizers merge more) and never
//! counts base64 as if it were prose.

/// A string this long or longer may be a base64 payload (shorter ones are always text).
const BLOB_MIN: usize = 256;
/// Tokens of an image whose dimensions cannot be read: the most a resized image costs.
pub const IMAGE_DEFAULT_TOKENS: u64 = 1_600;

/// The estimated input tokens of a request body (JSON, any of the supported formats).
pub fn estimate_input_tokens(body: &[u8]) -> u64 {
    let mut tally = Tally::default();
    let mut i = 0;
    while let Some(q) = memchr::memchr(b'"', &body[i..]) {
        let start = i + q + 1;
        let end = string_end(body, start);
        tally.string(&body[start..end]);
        i = (end + 1).min(body.len());
        if end >= body.len() {
            tally.inside -= 1; // no closing quote
            break;
        }
    }
    tally.total(body.len())
}

/// The estimate's running count over a body's strings (keys and values). Bytes outside
/// strings are not visited: they are the body's length less the strings and their quotes.
/// `wire::scan` keeps one in its pass over a request, so the estimate costs no pass of its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Text, in quarter tokens.
    quarters: u64,
    /// Payloads (images, audio, documents), in tokens.
    tokens: u64,
    /// Bytes inside strings, and the strings' quotes.
    inside: usize,
}

impl Tally {
    /// Count one string's content (between its quotes, escapes as written).
    pub fn string(&mut self, text: &[u8]) {
        self.string_of(text, text.is_ascii());
    }

    /// [`Tally::string`] of a string whose caller knows whether it is all ASCII.
    pub fn string_of(&mut self, text: &[u8], ascii: bool) {
        match (text.len() >= BLOB_MIN).then(|| blob(text)).flatten() {
            Some(t) => self.tokens += t,
            None if ascii => self.quarters += text.len() as u64,
            None => self.quarters += text_quarters(text),
        }
        self.inside += text.len() + 2;
    }

    /// The estimate of a body `len` bytes long whose strings were all counted.
    pub fn total(&self, len: usize) -> u64 {
        let outside = len.saturating_sub(self.inside);
        self.tokens + self.quarters.div_ceil(4) + (outside as u64).div_ceil(8)
    }
}

/// The index of the closing quote of the string starting at `start` (or the end of input).
fn string_end(b: &[u8], start: usize) -> usize {
    let mut j = start;
    while let Some(k) = memchr::memchr2(b'"', b'\\', &b[j..]) {
        let at = j + k;
        if b[at] == b'"' {
            return at;
        }
        j = at + 2;
        if j >= b.len() {
            return b.len();
        }
    }
    b.len()
}

/// Text in quarter tokens (see the module doc).
fn text_quarters(s: &[u8]) -> u64 {
    if s.is_ascii() {
        return s.len() as u64;
    }
    let text = String::from_utf8_lossy(s);
    text.chars()
        .map(|c| match c {
            c if c.is_ascii() => 1,
            c if is_cjk(c) => 4,
            _ => 2,
        })
        .sum()
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x9FFF      // CJK radicals, kana, CJK unified ideographs
        | 0xA960..=0xA97F    // Hangul Jamo extended
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0xFF00..=0xFFEF    // full-width forms
        | 0x20000..=0x3FFFF) // CJK extensions
}

/// What a base64 payload counts, or `None` when the string is text after all.
fn blob(s: &[u8]) -> Option<u64> {
    let (media, data) = match s.strip_prefix(b"data:") {
        Some(rest) => {
            let comma = memchr::memchr(b',', rest)?;
            let head = &rest[..comma];
            if !head.ends_with(b";base64") {
                return None;
            }
            (Some(head), &rest[comma + 1..])
        }
        None => (None, s),
    };
    if !data[..data.len().min(BLOB_MIN)]
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'\\'))
    {
        return None;
    }
    let decoded_len = (data.len() as u64) * 3 / 4;
    let head = decode_prefix(data, 64 * 1024);
    let kind = media
        .map(media_kind)
        .filter(|k| *k != Kind::Other)
        .unwrap_or_else(|| sniff(&head));
    Some(match kind {
        Kind::Image => image_size(&head).map_or(IMAGE_DEFAULT_TOKENS, |(w, h)| image_tokens(w, h)),
        Kind::Audio => decoded_len.div_ceil(1_600),
        Kind::Other if media.is_none() && !looks_binary(&head) => return None,
        Kind::Other => decoded_len.div_ceil(32),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Image,
    Audio,
    Other,
}

fn media_kind(head: &[u8]) -> Kind {
    if head.starts_with(b"image/") {
        Kind::Image
    } else if head.starts_with(b"audio/") {
        Kind::Audio
    } else {
        Kind::Other
    }
}

/// The payload's kind from its first bytes.
fn sniff(b: &[u8]) -> Kind {
    let riff = |tag: &[u8]| b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == tag;
    if b.starts_with(b"\x89PNG")
        || b.starts_with(b"\xFF\xD8\xFF")
        || b.starts_with(b"GIF8")
        || riff(b"WEBP")
    {
        Kind::Image
    } else if b.starts_with(b"ID3")
        || b.starts_with(b"OggS")
        || b.starts_with(b"fLaC")
        || riff(b"WAVE")
        || (b.len() > 1 && b[0] == 0xFF && b[1] & 0xE0 == 0xE0)
    {
        Kind::Audio
    } else {
        Kind::Other
    }
}

/// Decoded bytes that are not text: a binary payload, not a long token-like string.
fn looks_binary(b: &[u8]) -> bool {
    let n = b.len().min(256);
    n > 0 && b[..n].iter().filter(|c| **c < 0x09 || **c > 0x7E).count() * 4 > n
}

/// Anthropic's image rule: scale to fit 1568 px on the long edge and 1.15 MP, then w*h/750.
pub fn image_tokens(width: u32, height: u32) -> u64 {
    let (mut width, mut height) = (f64::from(width.max(1)), f64::from(height.max(1)));
    let edge = 1568.0 / width.max(height);
    let area = (1_150_000.0 / (width * height)).sqrt();
    let scale = edge.min(area).min(1.0);
    width = (width * scale).floor().max(1.0);
    height = (height * scale).floor().max(1.0);
    ((width * height) / 750.0).ceil() as u64
}

/// An image's (width, height) from its header: PNG, GIF, JPEG (SOF marker), WebP.
fn image_size(b: &[u8]) -> Option<(u32, u32)> {
    let be32 = |i: usize| Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?));
    let le16 = |i: usize| {
        Some(u32::from(u16::from_le_bytes(
            b.get(i..i + 2)?.try_into().ok()?,
        )))
    };
    let le24 = |i: usize| {
        let bytes = b.get(i..i + 3)?;
        Some(u32::from(bytes[0]) | u32::from(bytes[1]) << 8 | u32::from(bytes[2]) << 16)
    };
    if b.starts_with(b"\x89PNG") {
        return Some((be32(16)?, be32(20)?));
    }
    if b.starts_with(b"GIF8") {
        return Some((le16(6)?, le16(8)?));
    }
    if b.starts_with(b"\xFF\xD8") {
        return jpeg_size(b);
    }
    if b.len() >= 30 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        return match &b[12..16] {
            b"VP8 " => Some((le16(26)? & 0x3FFF, le16(28)? & 0x3FFF)),
            b"VP8L" => {
                let header = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
                Some(((header & 0x3FFF) + 1, ((header >> 14) & 0x3FFF) + 1))
            }
            b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
            _ => None,
        };
    }
    None
}

/// A JPEG's size from its first start-of-frame marker.
fn jpeg_size(b: &[u8]) -> Option<(u32, u32)> {
    let mut i = 2;
    while i + 9 < b.len() {
        if b[i] != 0xFF {
            i += 1;
            continue;
        }
        let marker = b[i + 1];
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        let sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if sof {
            let height = u32::from(u16::from_be_bytes([b[i + 5], b[i + 6]]));
            let width = u32::from(u16::from_be_bytes([b[i + 7], b[i + 8]]));
            return Some((width, height));
        }
        if marker == 0xD8 || marker == 0x01 || (0xD0..=0xD7).contains(&marker) {
            i += 2;
        } else {
            i += 2 + len;
        }
    }
    None
}

/// Decode up to `max` bytes from the start of a base64 payload (JSON `\/` escapes skipped;
/// decoding stops at the first byte that is not base64).
fn decode_prefix(data: &[u8], max: usize) -> Vec<u8> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(max.min(data.len()));
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in data {
        if c == b'\\' {
            continue;
        }
        let Some(v) = val(c) else { break };
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            if out.len() >= max {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut encoded = String::new();
        for c in bytes.chunks(3) {
            let triple = (u32::from(c[0]) << 16)
                | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                | u32::from(*c.get(2).unwrap_or(&0));
            for k in 0..4 {
                if k <= c.len() {
                    encoded.push(A[((triple >> (18 - 6 * k)) & 63) as usize] as char);
                } else {
                    encoded.push('=');
                }
            }
        }
        encoded
    }

    /// A PNG of `w` x `h` with `pad` bytes of (incompressible-looking) data after the header.
    fn png(w: u32, h: u32, pad: usize) -> Vec<u8> {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend(w.to_be_bytes());
        png.extend(h.to_be_bytes());
        png.extend((0..pad).map(|i| (i * 7 % 251) as u8));
        png
    }

    #[test]
    fn ascii_text_is_about_four_characters_a_token() {
        let text = "word ".repeat(400);
        let body = format!(r#"{{"messages":[{{"role":"user","content":"{text}"}}]}}"#);
        let tokens = estimate_input_tokens(body.as_bytes());
        assert!((500..=540).contains(&tokens), "{tokens}");
    }

    #[test]
    fn cjk_counts_a_token_per_character_not_a_quarter() {
        let text = "汉字测试".repeat(100); // 400 characters, 1,200 UTF-8 bytes
        let body = format!(r#"{{"content":"{text}"}}"#);
        let tokens = estimate_input_tokens(body.as_bytes());
        assert!((400..=410).contains(&tokens), "{tokens}");
        // bytes/4 would have said 300: an under-count.
        assert!(tokens > body.len() as u64 / 4);
    }

    /// B-token-estimate: a 60 KB PNG is not "20,000 tokens".
    #[test]
    fn a_base64_image_counts_by_its_size_not_its_length() {
        let img = b64(&png(1000, 800, 60_000));
        let anthropic = format!(
            r#"{{"messages":[{{"role":"user","content":[{{"type":"image","source":{{"type":"base64","media_type":"image/png","data":"{img}"}}}},{{"type":"text","text":"what is this"}}]}}]}}"#
        );
        let tokens = estimate_input_tokens(anthropic.as_bytes());
        assert_eq!(image_tokens(1000, 800), 1067);
        assert!((1067..1100).contains(&tokens), "{tokens}");
        let openai = format!(
            r#"{{"messages":[{{"role":"user","content":[{{"type":"image_url","image_url":{{"url":"data:image/png;base64,{img}"}}}}]}}]}}"#
        );
        let tokens = estimate_input_tokens(openai.as_bytes());
        assert!((1067..1100).contains(&tokens), "{tokens}");
    }

    #[test]
    fn large_images_are_scaled_first_and_unknown_ones_count_the_cap() {
        assert!(image_tokens(4000, 3000) <= 1_600);
        assert!(image_tokens(4000, 3000) >= 1_500);
        assert_eq!(image_tokens(64, 48), 5);
        // A JPEG whose frame header is cut off: the cap.
        let jpeg = b64(&[&b"\xFF\xD8\xFF\xE0\x00\x10JFIF"[..], &[7u8; 400]].concat());
        let body = format!(r#"{{"data":"{jpeg}"}}"#);
        let tokens = estimate_input_tokens(body.as_bytes());
        assert!((1_600..1_610).contains(&tokens), "{tokens}");
    }

    #[test]
    fn jpeg_gif_and_webp_sizes_are_read() {
        let mut jpeg = b"\xFF\xD8\xFF\xE0\x00\x04ab".to_vec();
        jpeg.extend(b"\xFF\xC0\x00\x11\x08\x01\x2C\x01\x90\x03");
        assert_eq!(image_size(&jpeg), Some((400, 300)));
        let gif = b"GIF89a\x40\x01\xF0\x00".to_vec();
        assert_eq!(image_size(&gif), Some((320, 240)));
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X\0\0\0\0\0\0\0\0".to_vec();
        webp.extend([0x3F, 0x01, 0x00, 0xEF, 0x00, 0x00]);
        assert_eq!(image_size(&webp), Some((320, 240)));
    }

    #[test]
    fn a_long_token_like_string_is_text_and_escapes_do_not_end_a_string() {
        let text = "abcdefg ".repeat(64); // 512 characters of text
        let body = format!(r#"{{"text":"{text}","q":"say \"hi\" now"}}"#);
        let tokens = estimate_input_tokens(body.as_bytes());
        assert!((128..=145).contains(&tokens), "{tokens}");
        // A thinking block's signature is base64 of binary: a payload, not 128 tokens of prose.
        let sig = "abcdefgh".repeat(64);
        let body = format!(r#"{{"signature":"{sig}"}}"#);
        let tokens = estimate_input_tokens(body.as_bytes());
        assert!(tokens < 30, "{tokens}");
    }

    #[test]
    fn audio_and_documents_have_their_own_rates() {
        let mp3 = b64(&[&b"ID3\x04\0\0\0\0\0\0"[..], &vec![0x55u8; 160_000]].concat());
        let body = format!(r#"{{"input_audio":{{"data":"{mp3}"}}}}"#);
        let tokens = estimate_input_tokens(body.as_bytes());
        assert!((95..=110).contains(&tokens), "{tokens}");
        let pdf = b64(&[&b"%PDF-1.7\n"[..], &vec![0x80u8; 32_000]].concat());
        let body = format!(r#"{{"file_data":"data:application/pdf;base64,{pdf}"}}"#);
        let tokens = estimate_input_tokens(body.as_bytes());
        assert!((1_000..=1_010).contains(&tokens), "{tokens}");
    }

    #[test]
    fn hostile_input_never_panics() {
        for b in [
            &b""[..],
            b"\"",
            b"\"\\",
            b"\"data:image/png;base64,",
            b"{\"a\":\"\\\"",
            &[0xFFu8; 300][..],
        ] {
            let _ = estimate_input_tokens(b);
        }
        let long = format!("\"data:;base64,{}\"", "/".repeat(300));
        let _ = estimate_input_tokens(long.as_bytes());
    }
}
