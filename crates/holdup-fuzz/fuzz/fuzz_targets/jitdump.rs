#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    holdup_fuzz::targets::for_libfuzzer(holdup_fuzz::targets::jitdump, data);
});
