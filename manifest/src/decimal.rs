//! Numbers in decimal without the formatting machinery: reports write millions of them (line
//! numbers, columns, list indices in paths).

/// The decimal digits of `n`, written at the end of `buf`.
pub fn digits(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut start = buf.len();
    let mut rest = n;
    loop {
        start -= 1;
        // A digit is below 10, so it fits a byte.
        buf[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    &buf[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_read_as_display_writes_them() {
        for n in [0, 7, 10, 99, 100, 4_214_549, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(digits(n, &mut [0; 20]), n.to_string().as_bytes());
        }
    }
}
