//! The lexer's shadow, refusals and statement pieces.

use super::*;

fn mode() -> LexMode {
    LexMode::default()
}

fn shadow(sql: &[u8], mode: &LexMode) -> Result<String, RouteError> {
    lex(sql, mode, 1_000).map(|l| l.shadow.into_owned())
}

fn refused(sql: &[u8], mode: &LexMode) -> bool {
    shadow(sql, mode).is_err()
}

#[test]
fn executable_comments_expand_by_version() {
    let m = LexMode {
        server_version: 101119,
        ..mode()
    };
    let cases: &[(&str, &str)] = &[
        ("SELECT /*!1*/", "SELECT    1  "),
        ("SELECT /*M!2*/", "SELECT     2  "),
        ("SELECT /*!40101 3 */", "SELECT          3   "),
        ("SELECT /*!101119 4 */", "SELECT           4   "),
        // Newer than the server: skipped.
        ("SELECT 1 /*!101120 , 5 */", "SELECT 1                  "),
        ("SELECT 1 /*M!999999 , 5 */", "SELECT 1                   "),
        // MySQL 5.7+ versions are skipped, MariaDB's are not.
        ("SELECT 1 /*!50700 , 6 */", "SELECT 1                 "),
        ("SELECT 1 /*M!50700 , 6 */", "SELECT 1      , 6   "),
        ("SELECT 1 /*!50699 , 7 */", "SELECT 1          , 7   "),
        // A sixth digit belongs to the version.
        ("SELECT /*!1000001*/", "SELECT          1  "),
        // Fewer than five digits: no version, content executed.
        ("SELECT /*!4010 1*/", "SELECT    4010 1  "),
        // `*/` inside a string of the content does not end it.
        ("SELECT /*! '*/' */", "SELECT    '*/'   "),
        // /*m! (lower case) is an ordinary comment.
        ("SELECT 1 /*m! , 2 */", "SELECT 1            "),
        // Positions stay in place.
        (
            "SELECT 1 FROM t WHERE /*!id = 5*/",
            "SELECT 1 FROM t WHERE    id = 5  ",
        ),
    ];
    for (sql, want) in cases {
        let got = shadow(sql.as_bytes(), &m).unwrap();
        assert_eq!(got.len(), sql.len(), "{sql}");
        assert_eq!(words(&got), words(want), "{sql}");
    }
    // The content stays at its offsets.
    assert_eq!(
        shadow(b"SELECT 1 FROM t WHERE /*!id = 5*/", &m).unwrap(),
        "SELECT 1 FROM t WHERE    id = 5  "
    );
}

fn words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn smuggling_attacks_are_seen() {
    // The content of /*M! */ is SQL to the router too.
    let s = shadow(
        b"/*M!CREATE TABLE db00001.x (a int) */ SELECT local_id FROM db00001.pins LIMIT 0",
        &mode(),
    )
    .unwrap();
    assert!(s.starts_with("    CREATE TABLE"), "{s}");
    let s = shadow(b"SET @a=1 /*M!, GLOBAL max_connect_errors=4242 */", &mode()).unwrap();
    assert!(s.contains(", GLOBAL max_connect_errors=4242"), "{s}");
    // Under NO_BACKSLASH_ESCAPES `\` does not escape the quote.
    let nbe = LexMode {
        no_backslash_escapes: true,
        ..mode()
    };
    let sql = b"SET @x='\\', GLOBAL max_connect_errors=4243 -- '";
    let lexed = lex(sql, &nbe, 100).unwrap();
    assert_eq!(lexed.literals, vec![7..10]);
    assert_eq!(
        lexed.shadow,
        "SET @x='\u{1a}', GLOBAL max_connect_errors=4243     "
    );
    // Without the mode the same text is one string.
    let lexed = lex(sql, &mode(), 100).unwrap();
    assert_eq!(lexed.literals, vec![7..sql.len()]);
}

#[test]
fn gbk_trail_bytes_are_not_backslashes() {
    let gbk = LexMode {
        charset: ClientCharset::AsciiTrail(TrailCharset::Gbk),
        ..mode()
    };
    // 0xBF5C is one character: the quote after it closes the string.
    let sql = b"SELECT '\xbf\x5c' OR 1=1 -- '";
    let lexed = lex(sql, &gbk, 100).unwrap();
    assert_eq!(lexed.literals, vec![7..11]);
    assert_eq!(lexed.shadow, "SELECT '\u{1a}\u{1a}' OR 1=1     ");
    // Read as latin1 the same bytes are an escaped quote.
    let latin1 = LexMode {
        charset: ClientCharset::AsciiSafe,
        ..mode()
    };
    let lexed = lex(sql, &latin1, 100).unwrap();
    assert_eq!(lexed.literals, vec![7..sql.len()]);
    // A trail byte 0x60 does not end a backtick identifier.
    let lexed = lex(b"SELECT `\x81\x60` FROM t", &gbk, 100).unwrap();
    assert_eq!(lexed.literals, vec![7..11]);
    // `\` escapes exactly one byte, a lead byte included.
    let lexed = lex(b"SELECT '\\\x81\x5c' , 1'", &gbk, 100).unwrap();
    assert_eq!(lexed.literals, vec![7..17]);
    // big5 and sjis.
    // big5 (0xA45C) and sjis / cp932 (0x955C).
    for (charset, sql) in [
        (TrailCharset::Big5, b"SELECT '\xa4\x5c' , 2"),
        (TrailCharset::Sjis, b"SELECT '\x95\x5c' , 2"),
    ] {
        let m = LexMode {
            charset: ClientCharset::AsciiTrail(charset),
            ..mode()
        };
        let lexed = lex(sql, &m, 100).unwrap();
        assert_eq!(lexed.literals, vec![7..11], "{charset:?}");
    }
    // 0xA4 is a single-byte character in sjis: its 0x5C escapes.
    let sjis = LexMode {
        charset: ClientCharset::AsciiTrail(TrailCharset::Sjis),
        ..mode()
    };
    assert!(refused(b"SELECT '\xa4\x5c' , 2", &sjis));
}

#[test]
fn non_utf8_bytes_become_placeholders() {
    let latin1 = LexMode {
        charset: ClientCharset::AsciiSafe,
        ..mode()
    };
    assert_eq!(
        shadow(b"SELECT HEX('\xe9')", &latin1).unwrap(),
        "SELECT HEX('\u{1a}')"
    );
    // Invalid UTF-8 on a utf8 connection too.
    assert_eq!(
        shadow(b"SELECT '\xe9'", &mode()).unwrap(),
        "SELECT '\u{1a}'"
    );
    // Valid UTF-8 on a utf8 connection is kept.
    assert_eq!(
        shadow("SELECT 'é'".as_bytes(), &mode()).unwrap(),
        "SELECT 'é'"
    );
    // Same length whatever happens.
    let sql = b"SELECT `\xe9\xe9` /* \xff */ '\xc3' -- \xfe\n";
    assert_eq!(shadow(sql, &latin1).unwrap().len(), sql.len());
}

#[test]
fn comments() {
    let cases: &[(&str, &str)] = &[
        ("SELECT 1 # x\n, 2", "SELECT 1    \n, 2"),
        ("SELECT 1 -- x\n, 2", "SELECT 1     \n, 2"),
        ("SELECT 1 --\t, 2", "SELECT 1        "),
        ("SELECT 1 --\x01, 2", "SELECT 1        "),
        ("SELECT 1 --", "SELECT 1   "),
        ("SELECT 1 /* a /* b */, 2", "SELECT 1              , 2"),
        ("SELECT /*+ SHARD(1) */ 1", "SELECT /*+ SHARD(1) */ 1"),
        ("SELECT '#', \"--\", `/*`", "SELECT '#', \"--\", `/*`"),
    ];
    for (sql, want) in cases {
        let got = shadow(sql.as_bytes(), &mode()).unwrap();
        assert_eq!(got.len(), sql.len(), "{sql:?}");
        assert_eq!(words(&got), words(want), "{sql:?}");
    }
    for sql in [
        "SELECT 1--1",
        "SELECT 1 ---1",
        "SELECT 1 /* open",
        "SELECT /*! 1",
        "SELECT 1 /*!99999 /* nested */ , 2 */",
        "SELECT /*! 1 /* nested */ */",
        "SELECT /*! 1 # x\n */",
        "SELECT /*! 1 -- x\n */",
        "SELECT /*! /*+ SHARD(1) */ 1 */",
        "SELECT /*+ SHARD(1) /* x */ 1",
        "SELECT /*! 1; SELECT 2 */",
        "SELECT 1 # \0 x\n",
        "SELECT '\\",
        "SELECT 'abc",
        "SELECT `abc",
        "SELECT 1.5e--1",
        "SELECT 1.5e+'",
        "SELECT .5e/* x */",
        "SELECT 2.e#\n",
        "SELECT X'4G'",
    ] {
        assert!(refused(sql.as_bytes(), &mode()), "{sql:?}");
    }
    // Ordinary uses of e and dots are fine.
    for sql in [
        "SELECT u.email, t1.e, 1.5e3, 1e5, 1e-5, 1.5E+3, .5, 0x1F, 1..2 FROM u",
        "SELECT a.5e FROM t a",
    ] {
        assert!(!refused(sql.as_bytes(), &mode()), "{sql:?}");
    }
}

#[test]
fn ansi_quotes() {
    let ansi = LexMode {
        ansi_quotes: true,
        ..mode()
    };
    let lexed = lex(br#"SELECT "a b" FROM "t""#, &ansi, 100).unwrap();
    assert_eq!(lexed.shadow, "SELECT `a b` FROM `t`");
    assert_eq!(lexed.literals, vec![7..12, 18..21]);
    assert!(refused(br#"SELECT "a""b""#, &ansi));
    assert!(refused(br#"SELECT "a`b""#, &ansi));
    // Without the mode it is a string.
    assert_eq!(
        shadow(br#"SELECT "a b""#, &mode()).unwrap(),
        r#"SELECT "a b""#
    );
}

#[test]
fn statements_markers_and_token_cap() {
    let lexed = lex(b" SELECT 1 ; /* c */ ; SELECT '?;', ? ;", &mode(), 100).unwrap();
    assert_eq!(lexed.statements, vec![1..9, 22..36]);
    assert_eq!(lexed.markers, vec![35..36]);
    let many = format!("SELECT 1 FROM t WHERE id IN ({})", vec!["1"; 600].join(","));
    assert!(matches!(
        lex(many.as_bytes(), &mode(), 1_000),
        Err(RouteError::Unsupported(_))
    ));
    assert!(lex(many.as_bytes(), &mode(), 2_000).is_ok());
}

#[test]
fn never_panics_on_any_prefix() {
    let sql: &[u8] =
        b"SELECT /*!40101 `a\xbf\x5c`*/ 'x\\'y' \"q\" /*+ H */ -- c\n#\n 1.5e3 X'0A' N'n' ?";
    for charset in [
        ClientCharset::Utf8,
        ClientCharset::AsciiSafe,
        ClientCharset::AsciiTrail(TrailCharset::Gbk),
        ClientCharset::AsciiTrail(TrailCharset::Big5),
        ClientCharset::AsciiTrail(TrailCharset::Sjis),
    ] {
        for flags in 0..4 {
            let m = LexMode {
                charset,
                no_backslash_escapes: flags & 1 != 0,
                ansi_quotes: flags & 2 != 0,
                ..mode()
            };
            for end in 0..=sql.len() {
                for start in 0..end.min(8) {
                    if let Ok(l) = lex(&sql[start..end], &m, 1_000) {
                        assert_eq!(l.shadow.len(), end - start);
                    }
                }
            }
        }
    }
}

#[test]
fn leading_blanks_and_comments_are_skipped() {
    let skip =
        |sql: &str| String::from_utf8_lossy(skip_blanks_and_comments(sql.as_bytes())).into_owned();
    assert_eq!(skip(" \t\r\n SELECT 1"), "SELECT 1");
    assert_eq!(
        skip("/* a */ /*+ SHARD(1) */ /*!50100 x */SELECT"),
        "SELECT"
    );
    assert_eq!(skip("# line\n-- line\n--\tline\nINSERT"), "INSERT");
    assert_eq!(skip("--"), "");
    assert_eq!(skip("--x"), "--x", "`--` without a blank is a double minus");
    assert_eq!(skip("/* unterminated"), "");
    assert_eq!(skip("(SELECT"), "(SELECT");
}

/// A statement whose shadow would be itself is not copied (a long
/// statement is then held once while it is routed); any change made
/// copies it, the statement unchanged.
#[test]
fn the_shadow_borrows_the_statement_unless_it_differs() {
    let latin1 = LexMode {
        charset: ClientCharset::AsciiSafe,
        ..mode()
    };
    for (sql, mode, changed) in [
        (
            &b"SELECT 'caf\xc3\xa9' FROM t WHERE id = ?"[..],
            mode(),
            false,
        ),
        (b"SELECT 1 /*+ SHARD(3) */", mode(), false),
        (b"SELECT 'a\n b'  ,\t2", mode(), false),
        (b"SELECT 1 /* note */", mode(), true),
        (b"SELECT 1 # note", mode(), true),
        (b"SELECT /*!1*/", mode(), true),
        (b"SELECT 'caf\xc3\xa9'", latin1, true),
        (b"SELECT '\xff'", mode(), true),
    ] {
        let lexed = lex(sql, &mode, 1_000).expect("lexed");
        assert_eq!(
            matches!(lexed.shadow, Cow::Owned(_)),
            changed,
            "{}",
            String::from_utf8_lossy(sql)
        );
        assert_eq!(lexed.shadow.len(), sql.len());
        if !changed {
            assert_eq!(lexed.shadow.as_bytes(), sql);
        }
    }
}

/// What a reading found, comparable between two readings.
fn found(lexed: &Lexed<'_>) -> impl PartialEq + std::fmt::Debug {
    (
        lexed.shadow.to_string(),
        lexed.literals.clone(),
        lexed.hints.clone(),
        lexed.markers.clone(),
        lexed.comments.clone(),
        lexed.statements.clone(),
        lexed.tokens,
        lexed.values.clone(),
    )
}

/// ASCII texts built from the bytes the lexer treats specially, many of
/// each length: a deterministic sample of what a client could send.
fn ascii_texts() -> Vec<Vec<u8>> {
    const ALPHABET: &[u8] = b"'\"`\\ \n;?.-#/*!+eExXnN01a_$;(),=M";
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..20_000)
        .map(|i| {
            let len = 1 + i % 24;
            (0..len)
                .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                .collect()
        })
        .collect()
}

/// In a single-byte charset the lexer scans words and strings without the
/// multibyte machinery; on ASCII text a multibyte charset reads the same
/// (no ASCII byte starts a big5 / gbk / sjis character), so both scans
/// must find exactly the same, or refuse the same.
#[test]
fn ascii_text_reads_alike_with_and_without_the_multibyte_scan() {
    let mut fixed: Vec<Vec<u8>> = [
        &b"SELECT c FROM sbtest1 WHERE id=12345"[..],
        b"SELECT 'a''b', 'c\\'d', \"e\"\"f\", 'g\\\\' FROM t",
        b"SELECT 'unterminated\\",
        b"SELECT x'1F', b'01', n'abc', 1e+5, 1.5e-3, a.1b, 0x1F",
        b"SELECT `a``b` /* c */ # d\n -- e\n; SELECT ? /*!50000 f */",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect();
    fixed.extend(ascii_texts());
    for sql in &fixed {
        for (no_backslash_escapes, ansi_quotes) in
            [(false, false), (true, false), (false, true), (true, true)]
        {
            let single = LexMode {
                no_backslash_escapes,
                ansi_quotes,
                ..mode()
            };
            let multibyte = LexMode {
                charset: ClientCharset::AsciiTrail(TrailCharset::Sjis),
                ..single
            };
            let fast = lex(sql, &single, 1_000).map(|l| found(&l));
            let slow = lex(sql, &multibyte, 1_000).map(|l| found(&l));
            assert_eq!(fast, slow, "{}", String::from_utf8_lossy(sql));
        }
    }
}

/// A reading handed back with `recycle` lends its lists to the next one,
/// which finds exactly what a reading with new lists finds.
#[test]
fn a_recycled_reading_leaves_nothing_in_the_next() {
    let texts = ascii_texts();
    let mut previous: Option<Lexed<'_>> = None;
    for sql in texts.iter().take(2_000) {
        let fresh = lex(sql, &mode(), 1_000).map(|l| found(&l));
        if let Some(previous) = previous.take() {
            previous.recycle();
        }
        let reused = lex(sql, &mode(), 1_000);
        assert_eq!(
            reused.as_ref().map(found).map_err(Clone::clone),
            fresh,
            "{}",
            String::from_utf8_lossy(sql)
        );
        previous = reused.ok();
    }
    let long = "SELECT ".to_owned() + &vec!["1"; 200].join(",");
    lex(long.as_bytes(), &mode(), 1_000)
        .expect("lexed")
        .recycle();
    let after = lex(b"SELECT 1", &mode(), 1_000).expect("lexed");
    assert_eq!(after.values.len(), 1);
    assert!(after.values.capacity() <= MAX_SPARE_ENTRIES);
}

#[test]
fn word_bytes_are_letters_digits_underscore_dollar_and_non_ascii() {
    for b in 0..=255u8 {
        assert_eq!(
            is_word_byte(b),
            b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80,
            "{b:#04x}"
        );
    }
}
