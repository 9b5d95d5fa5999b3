//! Compiles bpf/ringcap.c to BPF bytecode with Debian's clang and libbpf headers (`make deps` installs both).

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "bpf/ringcap.c";
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("ringcap.bpf.o");
    // -target bpf does not search the multiarch include directory, where <asm/types.h> lives.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap();
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    let status = Command::new(env::var("CLANG").unwrap_or_else(|_| "clang".into()))
        .args([
            "-O2", "-g", "-target", "bpf", "-Wall", "-Werror", "-I", &multiarch, "-c", src, "-o",
        ])
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("clang failed to compile {src} ({s}): see its messages above"),
        Err(e) => panic!(
            "cannot run clang ({e}): the XDP programs need it; install clang and libbpf-dev \
             (`make deps` does, or apt-get install clang libbpf-dev)"
        ),
    }
}
