//! Exact arithmetic on decimal numbers written as text (`-12.50`, `7`), as
//! the server sends them: comparison and addition.

use std::cmp::Ordering;

/// Compares two decimal numbers written as text (`-12.50`, `7`) exactly.
pub(super) fn compare_decimal_text(a: &[u8], b: &[u8]) -> Ordering {
    let (a_negative, a) = split_sign(a);
    let (b_negative, b) = split_sign(b);
    let a_zero = is_zero(a);
    let b_zero = is_zero(b);
    match (a_negative && !a_zero, b_negative && !b_zero) {
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    let magnitude = compare_magnitude(a, b);
    if a_negative && !a_zero {
        magnitude.reverse()
    } else {
        magnitude
    }
}

/// The sign of a decimal text and its digits.
fn split_sign(text: &[u8]) -> (bool, &[u8]) {
    match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    }
}

/// Whether a decimal text's digits are all zero.
fn is_zero(text: &[u8]) -> bool {
    text.iter().all(|b| *b == b'0' || *b == b'.')
}

/// Compares the absolute values of two unsigned decimal texts.
fn compare_magnitude(a: &[u8], b: &[u8]) -> Ordering {
    let split = |t: &[u8]| -> (Vec<u8>, Vec<u8>) {
        let mut parts = t.splitn(2, |c| *c == b'.');
        let int: Vec<u8> = parts
            .next()
            .unwrap_or_default()
            .iter()
            .copied()
            .skip_while(|c| *c == b'0')
            .collect();
        let mut frac: Vec<u8> = parts.next().unwrap_or_default().to_vec();
        while frac.last() == Some(&b'0') {
            frac.pop();
        }
        (int, frac)
    };
    let (a_int, a_frac) = split(a);
    let (b_int, b_frac) = split(b);
    a_int
        .len()
        .cmp(&b_int.len())
        .then_with(|| a_int.cmp(&b_int))
        .then_with(|| a_frac.cmp(&b_frac))
}

/// Adds two numbers written as text: exactly for integers and decimals,
/// as doubles when either is in exponent form.
pub(super) fn add_numbers(a: &[u8], b: &[u8]) -> Vec<u8> {
    let (x, y) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    if let (Some(x), Some(y)) = (parse_scaled(&x), parse_scaled(&y)) {
        let scale = x.1.max(y.1);
        let widen = |(value, s): (i128, u32)| value * 10i128.pow(scale - s);
        return format_scaled(widen(x) + widen(y), scale).into_bytes();
    }
    let sum = x.trim().parse::<f64>().unwrap_or(0.0) + y.trim().parse::<f64>().unwrap_or(0.0);
    sum.to_string().into_bytes()
}

/// A decimal text as (digits without the point, digits after the point).
fn parse_scaled(text: &str) -> Option<(i128, u32)> {
    let text = text.trim();
    if text.contains(['e', 'E']) {
        return None;
    }
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let scale = u32::try_from(frac.len()).ok()?;
    if scale > 30 {
        return None;
    }
    let digits = format!("{int}{frac}");
    Some((digits.parse().ok()?, scale))
}

/// Writes `value / 10^scale` as a decimal text with `scale` digits after
/// the point.
fn format_scaled(value: i128, scale: u32) -> String {
    if scale == 0 {
        return value.to_string();
    }
    let negative = value < 0;
    let digits = value.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{}{int}.{frac}", if negative { "-" } else { "" })
}
