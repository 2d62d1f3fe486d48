//! Parsing the bundled test data and rejecting malformed input.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use kms_vectors::{
    load_all_testdata, load_file, parse_cctv, parse_rfc8032, parse_sign_input, parse_speccheck,
    parse_suite, parse_wycheproof, parse_zip215, testdata_dir, Case, ExpectedVerdicts, Suite,
    VectorError,
};

const LINE_1: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a:d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a::e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b:";

fn sign_input_lines(n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(testdata_dir().join("ed25519_sign.input_1024.txt")).unwrap();
    text.lines().take(n).map(str::to_owned).collect()
}

fn tmp_file(name: &str, contents: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kms-vectors-parse");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn counts(cases: &[Case]) -> BTreeMap<Suite, usize> {
    let mut counts = BTreeMap::new();
    for case in cases {
        *counts.entry(case.suite).or_default() += 1;
    }
    counts
}

#[test]
fn all_testdata_matches_expected_verdicts() {
    let cases = load_all_testdata().unwrap();
    let expected = ExpectedVerdicts::load_default().unwrap();
    assert_eq!(cases.len(), 2302);
    assert_eq!(expected.len(), 2302);
    assert!(!expected.is_empty());
    let want = BTreeMap::from([
        (Suite::Wycheproof, 151),
        (Suite::SignInput, 1024),
        (Suite::Speccheck, 12),
        (Suite::Cctv, 914),
        (Suite::Rfc8032, 5),
        (Suite::Zip215, 196),
    ]);
    assert_eq!(counts(&cases), want);

    let mut seen = HashSet::new();
    for case in &cases {
        assert!(
            seen.insert((case.suite, case.id.clone())),
            "duplicate {} {}",
            case.suite,
            case.id
        );
        let verdict = expected
            .for_case(case)
            .unwrap_or_else(|| panic!("no expected verdict for {} {}", case.suite, case.id));
        assert_eq!(expected.get(case.suite, &case.id), Some(verdict));
        if let Some(file) = case.file_expectation {
            assert_eq!(file, verdict, "{} {}: file disagrees", case.suite, case.id);
        }
        if case.fixed().is_none() {
            assert!(
                !verdict,
                "{} {}: wrong length but valid",
                case.suite, case.id
            );
        }
    }
    // Every tsv entry is some case (same size, all cases found, ids unique).
    assert_eq!(seen.len(), expected.len());
}

#[test]
fn per_suite_details() {
    let dir = testdata_dir();
    let wycheproof = load_file(&dir.join("wycheproof_ed25519_test.json")).unwrap();
    assert_eq!(wycheproof.len(), 151);
    assert!(wycheproof.iter().all(|c| c.suite == Suite::Wycheproof));
    let lengths: HashSet<usize> = wycheproof.iter().map(|c| c.signature.len()).collect();
    for len in [0, 63, 65, 64] {
        assert!(lengths.contains(&len), "no {len}-byte signature");
    }
    for case in &wycheproof {
        assert_eq!(
            case.fixed().is_some(),
            case.signature.len() == 64 && case.public_key.len() == 32
        );
    }
    let first = &wycheproof[0];
    assert_eq!(first.id, "1");
    assert_eq!(first.file_expectation, Some(true));
    assert!(first.message.is_empty());
    assert!(wycheproof.iter().any(|c| c.file_expectation == Some(false)));

    let sign = load_file(&dir.join("ed25519_sign.input_1024.txt")).unwrap();
    assert_eq!(sign.len(), 1024);
    assert_eq!(sign[1023].id, "1024");
    assert_eq!(sign[1023].message.len(), 1023);
    assert!(sign
        .iter()
        .all(|c| c.fixed().is_some() && c.file_expectation == Some(true)));

    let rfc = load_file(&dir.join("rfc8032_7.1_ed25519_vectors.json")).unwrap();
    let ids: Vec<&str> = rfc.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        ["TEST 1", "TEST 2", "TEST 3", "TEST 1024", "TEST SHA(abc)"]
    );
    // TEST 1/2/3/1024 are sign.input lines 1/2/3/1024.
    for (r, line) in rfc.iter().zip([0, 1, 2, 1023]) {
        let s = &sign[line];
        assert_eq!(
            (&r.public_key, &r.message, &r.signature),
            (&s.public_key, &s.message, &s.signature)
        );
    }

    let cctv = load_file(&dir.join("cctv_ed25519vectors.json")).unwrap();
    assert_eq!(cctv.len(), 914);
    assert_eq!(cctv[0].message, b"ed25519vectors 3");
    assert_eq!(cctv[913].id, "913");

    let spec = load_file(&dir.join("speccheck_cases.json")).unwrap();
    assert_eq!(spec.len(), 12);
    assert_eq!(spec[11].id, "11");

    let zip = load_file(&dir.join("zip215_small_order_vectors.json")).unwrap();
    assert_eq!(zip.len(), 196);
    assert!(zip
        .iter()
        .all(|c| c.message == b"Zcash" && c.file_expectation.is_none()));
}

#[test]
fn go_gz_is_128_sign_input_lines() {
    let go = load_file(&testdata_dir().join("go_ed25519_sign.input.gz")).unwrap();
    assert_eq!(go.len(), 128);
    assert!(go.iter().all(|c| c.suite == Suite::SignInput));
    assert_eq!(go[0].id, "1");
    assert_eq!(go[127].id, "128");
    let full = load_all_testdata().unwrap();
    let sign: HashSet<(&[u8], &[u8], &[u8])> = full
        .iter()
        .filter(|c| c.suite == Suite::SignInput)
        .map(|c| (&c.public_key[..], &c.message[..], &c.signature[..]))
        .collect();
    for case in &go {
        assert!(sign.contains(&(&case.public_key[..], &case.message[..], &case.signature[..])));
    }
}

#[test]
fn suite_names_round_trip() {
    for suite in Suite::ALL {
        assert_eq!(suite.to_string().parse::<Suite>(), Ok(suite));
        let cases = parse_suite(
            suite,
            &std::fs::read_to_string(testdata_dir().join(suite.testdata_file())).unwrap(),
        )
        .unwrap();
        assert!(cases.iter().all(|c| c.suite == suite));
    }
    assert_eq!(Suite::SignInput.to_string(), "sign.input");
    assert!("SignInput".parse::<Suite>().is_err());
}

fn line_error(result: Result<Vec<Case>, VectorError>) -> (usize, String) {
    let err = result.unwrap_err();
    let message = err.to_string();
    match err {
        VectorError::Line { line, .. } => (line, message),
        other => panic!("expected a line error, got {other:?}"),
    }
}

fn case_error(result: Result<Vec<Case>, VectorError>) -> (String, String) {
    let err = result.unwrap_err();
    let message = err.to_string();
    match err {
        VectorError::Case { id, .. } => (id, message),
        other => panic!("expected a case error, got {other:?}"),
    }
}

#[test]
fn sign_input_malformed_lines_are_named() {
    let good = sign_input_lines(3);
    assert_eq!(parse_sign_input(&good.join("\n")).unwrap().len(), 3);

    let with_line_3 = |line3: String| format!("{}\n{}\n{line3}\n", good[0], good[1]);

    // Bad hex in the message field of line 3.
    let mut fields: Vec<String> = good[2].split(':').map(str::to_owned).collect();
    fields[2] = "zz".to_owned();
    let (line, msg) = line_error(parse_sign_input(&with_line_3(fields.join(":"))));
    assert_eq!(line, 3);
    assert!(
        msg.starts_with("sign.input line 3: field 3 (msg) is not hex"),
        "{msg}"
    );

    // Missing trailing colon / missing field.
    let (line, msg) = line_error(parse_sign_input(&with_line_3(
        good[2].trim_end_matches(':').to_owned(),
    )));
    assert_eq!(line, 3);
    assert!(msg.contains("found 3 colon(s)"), "{msg}");
    let two_fields: Vec<&str> = good[2].split(':').take(2).collect();
    let (line, _) = line_error(parse_sign_input(&with_line_3(two_fields.join(":") + ":")));
    assert_eq!(line, 3);
    let (_, msg) = line_error(parse_sign_input(&with_line_3(format!("{}x", good[2]))));
    assert!(msg.contains("after the trailing colon"), "{msg}");

    // pk differs from sk‖pk.
    let mut fields: Vec<String> = good[2].split(':').map(str::to_owned).collect();
    fields[1] = good[0].split(':').nth(1).unwrap().to_owned();
    let (_, msg) = line_error(parse_sign_input(&with_line_3(fields.join(":"))));
    assert!(msg.contains("field 2 (pk) differs"), "{msg}");

    // sig‖msg does not end with msg.
    let mut fields: Vec<String> = good[2].split(':').map(str::to_owned).collect();
    fields[2] = "ff".repeat(70);
    let (_, msg) = line_error(parse_sign_input(&with_line_3(fields.join(":"))));
    assert!(msg.contains("does not end with field 3"), "{msg}");

    // sk‖pk of the wrong length.
    let mut fields: Vec<String> = good[2].split(':').map(str::to_owned).collect();
    fields[0].truncate(126);
    let (_, msg) = line_error(parse_sign_input(&with_line_3(fields.join(":"))));
    assert!(msg.contains("field 1 (sk‖pk) is 63 bytes"), "{msg}");

    // Odd-length hex, CRLF, blank lines keep line numbers.
    let (line, _) = line_error(parse_sign_input(&format!(
        "{LINE_1}\r\n\r\n{}0:\r\n",
        &LINE_1[..LINE_1.len() - 1]
    )));
    assert_eq!(line, 3);
    let cases = parse_sign_input(&format!("\n{LINE_1}\r\n\n{}\n", good[1])).unwrap();
    let ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["2", "4"]);

    // A short signature is kept as given.
    let short = LINE_1.replacen("::e5", "::", 1);
    let cases = parse_sign_input(&short).unwrap();
    assert_eq!(cases[0].signature.len(), 63);
    assert!(cases[0].fixed().is_none());
    assert!(parse_sign_input("").unwrap().is_empty());
}

const WYCHEPROOF: &str = r#"{"testGroups":[{"type":"EddsaVerify","publicKey":{"curve":"edwards25519","pk":"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"},"tests":[
 {"tcId":7,"msg":"","sig":"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b","result":"valid"},
 {"tcId":8,"msg":"00","sig":"","result":"invalid"},
 {"tcId":9,"msg":"00","sig":"0102","result":"acceptable"}]}]}"#;

#[test]
fn wycheproof_parses_and_reports_bad_cases() {
    let cases = parse_wycheproof(WYCHEPROOF).unwrap();
    let expectations: Vec<Option<bool>> = cases.iter().map(|c| c.file_expectation).collect();
    assert_eq!(expectations, [Some(true), Some(false), None]);
    assert!(cases[0].fixed().is_some());
    assert!(cases[1].signature.is_empty() && cases[1].fixed().is_none());

    // Truncated JSON.
    let err = parse_wycheproof(&WYCHEPROOF[..200]).unwrap_err();
    assert!(matches!(err, VectorError::Json { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with("wycheproof: invalid JSON"),
        "{err}"
    );

    // Wrong type of a field: the case is named.
    let (id, msg) = case_error(parse_wycheproof(
        &WYCHEPROOF.replace(r#""sig":"0102""#, r#""sig":258"#),
    ));
    assert_eq!(id, "9");
    assert_eq!(
        msg,
        "wycheproof case 9: field `sig` is not a string (found a number)"
    );
    let (_, msg) = case_error(parse_wycheproof(
        &WYCHEPROOF.replace(r#""msg":"00","sig":"""#, r#""msg":"0g","sig":"""#),
    ));
    assert!(
        msg.starts_with("wycheproof case 8: field `msg` is not hex"),
        "{msg}"
    );
    let (_, msg) = case_error(parse_wycheproof(&WYCHEPROOF.replace("acceptable", "maybe")));
    assert!(
        msg.starts_with("wycheproof case 9: field `result`"),
        "{msg}"
    );
    let (id, _) = case_error(parse_wycheproof(
        &WYCHEPROOF.replace(r#""tcId":8"#, r#""tcId":"8""#),
    ));
    assert_eq!(id, "at testGroups[0].tests[1]");
    let (id, msg) = case_error(parse_wycheproof(
        &WYCHEPROOF.replace(r#""tcId":9"#, r#""tcId":7"#),
    ));
    assert_eq!(
        (id.as_str(), msg.as_str()),
        ("7", "wycheproof case 7: duplicate case id")
    );

    // Group and top-level structure.
    let err = parse_wycheproof(&WYCHEPROOF.replace("edwards25519", "edwards448")).unwrap_err();
    assert!(
        matches!(err, VectorError::Format { .. }) && err.to_string().contains("testGroups[0]"),
        "{err}"
    );
    let err = parse_wycheproof(&WYCHEPROOF.replace(r#""pk":"#, r#""pkx":"#)).unwrap_err();
    assert!(err.to_string().contains("missing field `pk`"), "{err}");
    let err = parse_wycheproof("[]").unwrap_err();
    assert!(matches!(err, VectorError::Format { .. }), "{err:?}");
    let err = parse_wycheproof(r#"{"testGroups":{}}"#).unwrap_err();
    assert!(
        err.to_string().contains("`testGroups` is not an array"),
        "{err}"
    );
}

#[test]
fn json_suites_report_bad_cases() {
    let spec = r#"[{"message":"00","pub_key":"11","signature":"22"},{"message":"00","pub_key":11,"signature":"22"}]"#;
    assert_eq!(
        parse_speccheck(&spec.replace("11,", r#""11","#))
            .unwrap()
            .len(),
        2
    );
    let (id, msg) = case_error(parse_speccheck(spec));
    assert_eq!(id, "1");
    assert!(msg.contains("`pub_key` is not a string"), "{msg}");

    let cctv = r#"[{"number":0,"key":"00","sig":"11","msg":"hi","flags":null},{"number":1,"key":"00","sig":"11","flags":[]}]"#;
    let (id, msg) = case_error(parse_cctv(cctv));
    assert_eq!(id, "1");
    assert_eq!(msg, "cctv case 1: missing field `msg`");
    let (id, _) = case_error(parse_cctv(&cctv.replace(r#""number":1"#, r#""number":-1"#)));
    assert_eq!(id, "at index 1");
    let err = parse_cctv(r#"{"number":0}"#).unwrap_err();
    assert!(matches!(err, VectorError::Format { .. }), "{err:?}");
    let err = parse_cctv(&cctv[..cctv.len() - 3]).unwrap_err();
    assert!(matches!(err, VectorError::Json { .. }), "{err:?}");

    let rfc = r#"{"vectors":[{"name":"TEST 1","public_key":"00","message":"","signature":"xx"}]}"#;
    let (id, msg) = case_error(parse_rfc8032(rfc));
    assert_eq!(id, "TEST 1");
    assert!(
        msg.starts_with("rfc8032 case TEST 1: field `signature` is not hex"),
        "{msg}"
    );

    let zip = r#"{"cases":[{"number":0,"vk":"00","sig":"11","msg_hex":"5a"},{"number":0,"vk":"00","sig":"11","msg_hex":"5a"}]}"#;
    let (id, msg) = case_error(parse_zip215(zip));
    assert_eq!(id, "0");
    assert!(msg.contains("duplicate"), "{msg}");
    let err = parse_zip215(r#"{"vectors":[]}"#).unwrap_err();
    assert_eq!(err.to_string(), "zip215: top level: missing field `cases`");
}

#[test]
fn load_file_autodetects() {
    let lines = sign_input_lines(5).join("\n");
    let txt = tmp_file("five.txt", lines.as_bytes());
    let gz = tmp_file("five.input.gz", &gzip(lines.as_bytes()));
    let gz_no_ext = tmp_file("five.bin", &gzip(lines.as_bytes()));
    for path in [&txt, &gz, &gz_no_ext] {
        let cases = load_file(path).unwrap();
        assert_eq!(cases.len(), 5, "{}", path.display());
        assert!(cases.iter().all(|c| c.suite == Suite::SignInput));
    }
    let json = tmp_file("w.json", WYCHEPROOF.as_bytes());
    let cases = load_file(&json).unwrap();
    assert_eq!(cases.len(), 3);
    assert!(cases.iter().all(|c| c.suite == Suite::Wycheproof));
    let json_gz = tmp_file("w.json.gz", &gzip(WYCHEPROOF.as_bytes()));
    assert_eq!(load_file(&json_gz).unwrap().len(), 3);

    // Errors name the file.
    let bad = tmp_file(
        "bad.txt",
        format!("{lines}\nnot:a:sign:input:\n").as_bytes(),
    );
    let err = load_file(&bad).unwrap_err();
    assert!(matches!(err, VectorError::Line { line: 6, .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("bad.txt (sign.input) line 6: field 1 (sk‖pk) is not hex"),
        "{err}"
    );
    let truncated = tmp_file("truncated.json", &WYCHEPROOF.as_bytes()[..300]);
    let err = load_file(&truncated).unwrap_err();
    assert!(
        matches!(err, VectorError::Json { .. }) && err.to_string().contains("truncated.json"),
        "{err}"
    );
    let unknown = tmp_file("unknown.json", br#"{"hello":1}"#);
    assert!(matches!(
        load_file(&unknown).unwrap_err(),
        VectorError::Format { .. }
    ));
    let wrong = tmp_file(
        "wrong.json",
        WYCHEPROOF
            .replace(r#""tcId":8"#, r#""tcId":true"#)
            .as_bytes(),
    );
    let err = load_file(&wrong).unwrap_err();
    assert!(err.to_string().contains("wrong.json (wycheproof) case at testGroups[0].tests[1]: field `tcId` is not a non-negative integer (found a boolean)"), "{err}");
    let corrupt = tmp_file("corrupt.gz", &gzip(lines.as_bytes())[..40]);
    assert!(matches!(
        load_file(&corrupt).unwrap_err(),
        VectorError::Gzip { .. }
    ));
    let binary = tmp_file("binary.txt", &[0xff, 0xfe, 0x00]);
    assert!(matches!(
        load_file(&binary).unwrap_err(),
        VectorError::NotUtf8 { .. }
    ));
    let missing = testdata_dir().join("no_such_file.txt");
    assert!(matches!(
        load_file(&missing).unwrap_err(),
        VectorError::Io { .. }
    ));
}

#[test]
fn expected_verdicts_malformed() {
    let good = "suite\tid\tverdict\nrfc8032\tTEST 1\tvalid\r\nzip215\t0\tinvalid\n";
    let verdicts = ExpectedVerdicts::parse(good).unwrap();
    assert_eq!(verdicts.len(), 2);
    assert_eq!(verdicts.get(Suite::Rfc8032, "TEST 1"), Some(true));
    assert_eq!(verdicts.get(Suite::Zip215, "0"), Some(false));
    assert_eq!(verdicts.get(Suite::Zip215, "1"), None);

    for (text, line, needle) in [
        ("suite\tid\n", 1, "header"),
        (
            "suite\tid\tverdict\ncctv\t1\tvalid\ncctv\t2\tok\n",
            3,
            "verdict is `ok`",
        ),
        (
            "suite\tid\tverdict\nnacl\t1\tvalid\n",
            2,
            "unknown suite `nacl`",
        ),
        ("suite\tid\tverdict\ncctv\t1\n", 2, "3 tab-separated fields"),
        (
            "suite\tid\tverdict\ncctv\t1\tvalid\ncctv\t1\tinvalid\n",
            3,
            "duplicate",
        ),
    ] {
        let err = ExpectedVerdicts::parse(text).unwrap_err();
        assert!(
            matches!(err, VectorError::Line { line: l, .. } if l == line),
            "{err:?}"
        );
        assert!(err.to_string().contains(needle), "{err}");
    }
    assert!(ExpectedVerdicts::parse("").is_err());
}

#[test]
fn truncated_and_mangled_files_give_errors_not_panics() {
    for suite in Suite::ALL {
        let full = std::fs::read_to_string(testdata_dir().join(suite.testdata_file())).unwrap();
        assert!(full.is_ascii());
        // A prefix keeps the debug-build test fast (sign.input is 2.4 MB).
        let text = &full[..full.len().min(120_000)];
        for cut in (1..text.len()).step_by(text.len() / 37 + 1) {
            // Truncation: fine for sign.input at a line end, an error otherwise.
            let _ = parse_suite(suite, &text[..cut]);
            // One byte replaced by a non-hex, non-JSON character (in sign.input
            // every byte matters; JSON files have free-text fields).
            let mangled = format!("{}#{}", &text[..cut], &text[cut + 1..]);
            let result = parse_suite(suite, &mangled);
            assert!(suite != Suite::SignInput || result.is_err(), "cut {cut}");
        }
    }
}
