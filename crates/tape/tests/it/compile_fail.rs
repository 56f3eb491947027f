//! Compile-time errors that teach: a field of a type tape cannot record
//! names the type, lists the field types, and says what to use instead
//! (`#[diagnostic::on_unimplemented]` on the field traits). The expected
//! compiler output is in `tests/ui/*.stderr` (regenerate with
//! `TRYBUILD=overwrite`, then read the diff).

#[test]
fn unsupported_field_types_name_the_supported_ones() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
