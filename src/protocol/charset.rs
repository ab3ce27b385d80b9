//! MariaDB character sets as far as the proxy writes string literals in
//! them: the name used as an introducer (`_gbk X'C4E3'`) and which byte
//! sequences the server accepts as well-formed text in it.

/// A character set a client can use as `character_set_client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charset {
    name: &'static str,
    encoding: Encoding,
}

/// How the server checks that bytes are text of the character set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    /// `binary`: any bytes.
    Binary,
    /// One byte per character, every byte a character.
    SingleByte,
    /// UTF-8 up to 4 bytes (utf8mb4).
    Utf8mb4,
    /// UTF-8 up to 3 bytes (utf8mb3).
    Utf8mb3,
    /// gbk: lead 0x81-0xFE, trail 0x40-0x7E or 0x80-0xFE.
    Gbk,
    /// big5: lead 0xA1-0xF9, trail 0x40-0x7E or 0xA1-0xFE.
    Big5,
    /// sjis, cp932: single 0x00-0x7F and 0xA1-0xDF; lead 0x81-0x9F or
    /// 0xE0-0xFC, trail 0x40-0x7E or 0x80-0xFC.
    Sjis,
    /// Other multibyte sets (ujis, eucjpms, euckr, gb2312): no trail byte
    /// is ASCII; the server checks the rest.
    OtherMultibyte,
}

/// Every character set MariaDB accepts as `character_set_client`, by name
/// (`utf8` is MariaDB's alias of utf8mb3).
const CHARSETS: &[(&str, Encoding)] = &[
    ("utf8mb4", Encoding::Utf8mb4),
    ("utf8mb3", Encoding::Utf8mb3),
    ("binary", Encoding::Binary),
    ("gbk", Encoding::Gbk),
    ("big5", Encoding::Big5),
    ("sjis", Encoding::Sjis),
    ("cp932", Encoding::Sjis),
    ("ujis", Encoding::OtherMultibyte),
    ("eucjpms", Encoding::OtherMultibyte),
    ("euckr", Encoding::OtherMultibyte),
    ("gb2312", Encoding::OtherMultibyte),
    ("latin1", Encoding::SingleByte),
    ("latin2", Encoding::SingleByte),
    ("latin5", Encoding::SingleByte),
    ("latin7", Encoding::SingleByte),
    ("ascii", Encoding::SingleByte),
    ("armscii8", Encoding::SingleByte),
    ("cp1250", Encoding::SingleByte),
    ("cp1251", Encoding::SingleByte),
    ("cp1256", Encoding::SingleByte),
    ("cp1257", Encoding::SingleByte),
    ("cp850", Encoding::SingleByte),
    ("cp852", Encoding::SingleByte),
    ("cp866", Encoding::SingleByte),
    ("dec8", Encoding::SingleByte),
    ("geostd8", Encoding::SingleByte),
    ("greek", Encoding::SingleByte),
    ("hebrew", Encoding::SingleByte),
    ("hp8", Encoding::SingleByte),
    ("keybcs2", Encoding::SingleByte),
    ("koi8r", Encoding::SingleByte),
    ("koi8u", Encoding::SingleByte),
    ("macce", Encoding::SingleByte),
    ("macroman", Encoding::SingleByte),
    ("swe7", Encoding::SingleByte),
    ("tis620", Encoding::SingleByte),
];

/// MariaDB 10.11's collation ids below 256 (the ones a handshake can
/// name), as ranges with their character set (`information_schema.COLLATIONS`).
const COLLATION_IDS: &[(u8, u8, &str)] = &[
    (1, 1, "big5"),
    (2, 2, "latin2"),
    (3, 3, "dec8"),
    (4, 4, "cp850"),
    (5, 5, "latin1"),
    (6, 6, "hp8"),
    (7, 7, "koi8r"),
    (8, 8, "latin1"),
    (9, 9, "latin2"),
    (10, 10, "swe7"),
    (11, 11, "ascii"),
    (12, 12, "ujis"),
    (13, 13, "sjis"),
    (14, 14, "cp1251"),
    (15, 15, "latin1"),
    (16, 16, "hebrew"),
    (18, 18, "tis620"),
    (19, 19, "euckr"),
    (20, 20, "latin7"),
    (21, 21, "latin2"),
    (22, 22, "koi8u"),
    (23, 23, "cp1251"),
    (24, 24, "gb2312"),
    (25, 25, "greek"),
    (26, 26, "cp1250"),
    (27, 27, "latin2"),
    (28, 28, "gbk"),
    (29, 29, "cp1257"),
    (30, 30, "latin5"),
    (31, 31, "latin1"),
    (32, 32, "armscii8"),
    (33, 33, "utf8mb3"),
    (34, 34, "cp1250"),
    (35, 35, "ucs2"),
    (36, 36, "cp866"),
    (37, 37, "keybcs2"),
    (38, 38, "macce"),
    (39, 39, "macroman"),
    (40, 40, "cp852"),
    (41, 42, "latin7"),
    (43, 43, "macce"),
    (44, 44, "cp1250"),
    (45, 46, "utf8mb4"),
    (47, 49, "latin1"),
    (50, 52, "cp1251"),
    (53, 53, "macroman"),
    (54, 55, "utf16"),
    (56, 56, "utf16le"),
    (57, 57, "cp1256"),
    (58, 59, "cp1257"),
    (60, 61, "utf32"),
    (62, 62, "utf16le"),
    (63, 63, "binary"),
    (64, 64, "armscii8"),
    (65, 65, "ascii"),
    (66, 66, "cp1250"),
    (67, 67, "cp1256"),
    (68, 68, "cp866"),
    (69, 69, "dec8"),
    (70, 70, "greek"),
    (71, 71, "hebrew"),
    (72, 72, "hp8"),
    (73, 73, "keybcs2"),
    (74, 74, "koi8r"),
    (75, 75, "koi8u"),
    (77, 77, "latin2"),
    (78, 78, "latin5"),
    (79, 79, "latin7"),
    (80, 80, "cp850"),
    (81, 81, "cp852"),
    (82, 82, "swe7"),
    (83, 83, "utf8mb3"),
    (84, 84, "big5"),
    (85, 85, "euckr"),
    (86, 86, "gb2312"),
    (87, 87, "gbk"),
    (88, 88, "sjis"),
    (89, 89, "tis620"),
    (90, 90, "ucs2"),
    (91, 91, "ujis"),
    (92, 93, "geostd8"),
    (94, 94, "latin1"),
    (95, 96, "cp932"),
    (97, 98, "eucjpms"),
    (99, 99, "cp1250"),
    (101, 124, "utf16"),
    (128, 151, "ucs2"),
    (159, 159, "ucs2"),
    (160, 183, "utf32"),
    (192, 215, "utf8mb3"),
    (223, 223, "utf8mb3"),
    (224, 247, "utf8mb4"),
];

impl Charset {
    /// utf8mb4, the proxy's default.
    pub const UTF8MB4: Charset = Charset {
        name: "utf8mb4",
        encoding: Encoding::Utf8mb4,
    };

    /// The binary character set.
    pub const BINARY: Charset = Charset {
        name: "binary",
        encoding: Encoding::Binary,
    };

    /// The character set called `name` (any case; `utf8` is utf8mb3);
    /// `None` for one a client cannot use (ucs2, utf16, utf16le, utf32) or
    /// that MariaDB does not have.
    pub fn from_name(name: &str) -> Option<Charset> {
        let name = name.trim();
        let name = if name.eq_ignore_ascii_case("utf8") {
            "utf8mb3"
        } else {
            name
        };
        CHARSETS
            .iter()
            .find(|(known, _)| known.eq_ignore_ascii_case(name))
            .map(|&(name, encoding)| Charset { name, encoding })
    }

    /// The character set of a handshake collation id as MariaDB 10.11
    /// numbers them (28 is gbk); `None` for an id MariaDB does not have (it
    /// would use its default character set instead) or whose character set
    /// a client cannot use.
    pub fn from_collation_id(id: u8) -> Option<Charset> {
        COLLATION_IDS
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&id))
            .and_then(|(_, _, name)| Charset::from_name(name))
    }

    /// The name, as MariaDB spells it (`utf8mb4`, `gbk`, ...).
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Whether this is the binary character set.
    pub fn is_binary(self) -> bool {
        self.encoding == Encoding::Binary
    }

    /// Whether the server accepts `data` as text of this character set
    /// (an introduced literal that is not is refused with 1300).
    pub fn is_well_formed(self, data: &[u8]) -> bool {
        match self.encoding {
            Encoding::Binary | Encoding::SingleByte | Encoding::OtherMultibyte => true,
            Encoding::Utf8mb4 => std::str::from_utf8(data).is_ok(),
            Encoding::Utf8mb3 => {
                std::str::from_utf8(data).is_ok_and(|text| text.chars().all(|c| c <= '\u{FFFF}'))
            }
            Encoding::Gbk => double_byte_well_formed(
                data,
                |b| b < 0x80,
                |b| (0x81..=0xFE).contains(&b),
                |b| (0x40..=0x7E).contains(&b) || (0x80..=0xFE).contains(&b),
            ),
            Encoding::Big5 => double_byte_well_formed(
                data,
                |b| b < 0x80,
                |b| (0xA1..=0xF9).contains(&b),
                |b| (0x40..=0x7E).contains(&b) || (0xA1..=0xFE).contains(&b),
            ),
            Encoding::Sjis => double_byte_well_formed(
                data,
                |b| b < 0x80 || (0xA1..=0xDF).contains(&b),
                |b| (0x81..=0x9F).contains(&b) || (0xE0..=0xFC).contains(&b),
                |b| (0x40..=0x7E).contains(&b) || (0x80..=0xFC).contains(&b),
            ),
        }
    }
}

/// Whether `data` is a sequence of single bytes and lead + trail pairs.
fn double_byte_well_formed(
    data: &[u8],
    single: impl Fn(u8) -> bool,
    lead: impl Fn(u8) -> bool,
    trail: impl Fn(u8) -> bool,
) -> bool {
    let mut bytes = data.iter().copied();
    while let Some(byte) = bytes.next() {
        if single(byte) {
            continue;
        }
        if !(lead(byte) && bytes.next().is_some_and(&trail)) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_collation_ids() {
        assert_eq!(
            Charset::from_name("UTF8").map(Charset::name),
            Some("utf8mb3")
        );
        assert_eq!(
            Charset::from_name("cp932").map(Charset::name),
            Some("cp932")
        );
        assert_eq!(Charset::from_name("ucs2"), None);
        assert_eq!(Charset::from_name("nope"), None);
        assert_eq!(
            Charset::from_collation_id(28).map(Charset::name),
            Some("gbk")
        );
        assert_eq!(
            Charset::from_collation_id(45).map(Charset::name),
            Some("utf8mb4")
        );
        assert_eq!(
            Charset::from_collation_id(224).map(Charset::name),
            Some("utf8mb4")
        );
        assert_eq!(
            Charset::from_collation_id(8).map(Charset::name),
            Some("latin1")
        );
        assert_eq!(Charset::from_collation_id(63), Some(Charset::BINARY));
        assert_eq!(
            Charset::from_collation_id(1).map(Charset::name),
            Some("big5")
        );
        assert_eq!(Charset::from_collation_id(35), None); // ucs2
        assert_eq!(Charset::from_collation_id(0), None);
        assert_eq!(Charset::from_collation_id(17), None);
        assert_eq!(Charset::from_collation_id(255), None); // MySQL 8's utf8mb4_0900_ai_ci
        assert_eq!(
            Charset::from_collation_id(96).map(Charset::name),
            Some("cp932")
        );
    }

    #[test]
    fn well_formedness() {
        let cs = |name| Charset::from_name(name).expect("known charset");
        assert!(cs("gbk").is_well_formed(&[0xC4, 0xE3, 0x81, 0x5C, b'a']));
        assert!(!cs("gbk").is_well_formed(&[0x81]));
        assert!(!cs("gbk").is_well_formed(&[0x81, 0x20]));
        assert!(!cs("gbk").is_well_formed(&[0xFF, 0x40]));
        assert!(cs("big5").is_well_formed(&[0xA4, 0x5C]));
        assert!(!cs("big5").is_well_formed(&[0xA4]));
        assert!(cs("sjis").is_well_formed(&[0x83, 0x5C, 0xB1]));
        assert!(!cs("cp932").is_well_formed(&[0xFF]));
        assert!(cs("utf8mb4").is_well_formed("你😀".as_bytes()));
        assert!(!cs("utf8mb4").is_well_formed(&[0xFF]));
        assert!(!cs("utf8mb3").is_well_formed("😀".as_bytes()));
        assert!(cs("latin1").is_well_formed(&[0xFF, 0x00]));
        assert!(Charset::BINARY.is_well_formed(&[0xFF]));
    }
}
