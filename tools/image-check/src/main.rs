//! `kimage`: command-line front end of the `image_check` library (argument parsing, file I/O,
//! exit codes). See [`USAGE`].
#![forbid(unsafe_code)]

use std::fs::{self, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::process::ExitCode;

use image_check::check::{self, Options};
use image_check::symbols;

/// Printed for no arguments, `-h`/`--help`, and argument errors.
const USAGE: &str = "\
usage:
  kimage check [--no-efi] [--page-size BYTES] [--size-align BYTES] <Image> <ELF>
      Check the arm64 Image header and layout against the ELF it was made from
      (llvm-objcopy -O binary), and the PE/COFF header that makes it an EFI
      application. One line per check, then 'N passed, N failed'; exit status 1
      if any check failed. image_size must equal the memory extent rounded up to
      BYTES (default 4096, as linker.ld rounds the image end). --no-efi checks a
      plain Image instead: code0 a branch to the entry, res5 0, no PE header.
      --page-size (4096, the default, 16384 or 65536) is the kernel's page size:
      the flags must name it, and image_size is rounded to it unless
      --size-align says otherwise.
  kimage symbols <ELF>
      Write the kernel symbol table into the ELF's .ksyms section, in place
      (before objcopy makes the Image).";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["check", rest @ ..] => match parse_check(rest) {
            Some((options, image, elf)) => run_check(&options, image, elf),
            None => usage_error(),
        },
        ["symbols", elf] => run_symbols(elf),
        [] | ["-h" | "--help" | "help"] => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => usage_error(),
    }
}

fn usage_error() -> ExitCode {
    eprintln!("{USAGE}");
    ExitCode::from(2)
}

/// `[--no-efi] [--page-size BYTES] [--size-align BYTES] <Image> <ELF>`.
fn parse_check<'a>(args: &[&'a str]) -> Option<(Options, &'a str, &'a str)> {
    let mut options = Options::default();
    let args = match args {
        ["--no-efi", rest @ ..] => {
            options.efi = false;
            rest
        }
        rest => rest,
    };
    let args = match args {
        ["--page-size", value, rest @ ..] => {
            let parsed: u64 = value.trim().parse().ok()?;
            if ![4096, 16384, 65536].contains(&parsed) {
                eprintln!("kimage: --page-size must be 4096, 16384 or 65536");
                return None;
            }
            options.page_size = parsed;
            options.size_align = parsed;
            rest
        }
        rest => rest,
    };
    let rest = match args {
        ["--size-align", value, rest @ ..] => {
            let value = value.trim();
            let parsed = match value.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok()?,
                None => value.parse().ok()?,
            };
            if !parsed.is_power_of_two() {
                eprintln!("kimage: --size-align must be a power of two");
                return None;
            }
            options.size_align = parsed;
            rest
        }
        rest => rest,
    };
    match rest {
        [image, elf] => Some((options, image, elf)),
        _ => None,
    }
}

fn read(path: &str) -> Result<Vec<u8>, String> {
    fs::read(path).map_err(|e| format!("kimage: cannot read {path}: {e}"))
}

fn run_check(options: &Options, image_path: &str, elf_path: &str) -> ExitCode {
    let (image, elf) = match (read(image_path), read(elf_path)) {
        (Ok(image), Ok(elf)) => (image, elf),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let outcomes = check::check(&image, &elf, options);
    for outcome in &outcomes {
        println!("{outcome}");
    }
    let failed = outcomes.iter().filter(|o| !o.ok).count();
    println!("{} passed, {failed} failed", outcomes.len() - failed);
    if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn run_symbols(elf_path: &str) -> ExitCode {
    let result = read(elf_path).and_then(|elf| {
        let patch = symbols::plan(&elf).map_err(|e| format!("kimage symbols: {elf_path}: {e}"))?;
        let mut file = OpenOptions::new()
            .write(true)
            .open(elf_path)
            .map_err(|e| format!("kimage symbols: cannot open {elf_path} for writing: {e}"))?;
        file.seek(SeekFrom::Start(patch.file_offset))
            .and_then(|_| file.write_all(&patch.bytes))
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("kimage symbols: cannot write {elf_path}: {e}"))?;
        Ok(patch)
    });
    match result {
        Ok(patch) => {
            println!("{}", patch.summary());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_check_arguments() {
        let (options, image, elf) = parse_check(&["k.img", "k.elf"]).unwrap();
        assert_eq!((options, image, elf), (Options::default(), "k.img", "k.elf"));
        let (options, ..) = parse_check(&["--size-align", "0x10000", "a", "b"]).unwrap();
        assert_eq!(options.size_align, 0x10000);
        let (options, ..) = parse_check(&["--size-align", "2097152", "a", "b"]).unwrap();
        assert_eq!(options.size_align, 2 << 20);
        let (options, _, _) = parse_check(&["--no-efi", "--size-align", "4096", "a", "b"]).unwrap();
        assert_eq!(options, Options { size_align: 4096, page_size: 4096, efi: false });
        let (options, ..) = parse_check(&["--page-size", "65536", "a", "b"]).unwrap();
        assert_eq!(options, Options { size_align: 65536, page_size: 65536, efi: true });
        let (options, ..) =
            parse_check(&["--no-efi", "--page-size", "16384", "--size-align", "4096", "a", "b"]).unwrap();
        assert_eq!(options, Options { size_align: 4096, page_size: 16384, efi: false });
        assert!(parse_check(&["--page-size", "8192", "a", "b"]).is_none());
        assert!(parse_check(&["--size-align", "4096", "--no-efi", "a", "b"]).is_none());
        assert!(parse_check(&["--size-align", "3000", "a", "b"]).is_none());
        assert!(parse_check(&["a"]).is_none());
        assert!(parse_check(&["a", "b", "c"]).is_none());
    }
}
