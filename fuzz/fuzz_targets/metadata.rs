//! The TSDL parser and the static checks on arbitrary text (and the
//! packetized-metadata unwrapping on arbitrary bytes): errors, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok((text, _)) = tape_ctf::metadata::read::metadata_text(data) {
        if let Ok(parsed) = tape_ctf::parse_metadata(&text) {
            let _ = tape_ctf::validate(&parsed.trace);
            let _ = tape_ctf::decode::stream::TracePlan::new(&parsed.trace);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = tape_ctf::parse_metadata(text);
    }
});
