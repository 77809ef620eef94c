// Included with `include!` by the test components that embed the envelope library.
//
// `jsonschema` (inside the envelope library) reaches `getrandom`; the components are built
// with `--cfg getrandom_backend="custom"`, and this is the backend the real envelope's export
// shell would otherwise provide.

// The one `unsafe` of the components: getrandom's custom-backend hook has this signature.
#[allow(unsafe_code)]
#[no_mangle]
unsafe extern "Rust" fn __getrandom_v03_custom(dest: *mut u8, len: usize) -> Result<(), getrandom::Error> {
    // SAFETY: getrandom guarantees `dest` is valid for writes of `len` bytes.
    unsafe { core::ptr::write_bytes(dest, 0x5a, len) };
    Ok(())
}
