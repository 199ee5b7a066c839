//! The kernel command line: shell-style word splitting, and what each word means to the first
//! program, the way Linux's `init/main.c` hands boot parameters to init.
//!
//! Splitting follows the POSIX shell's quoting (XCU 2.2): outside quotes, blanks separate words
//! and a backslash makes the next character literal; `'...'` keeps everything literally; inside
//! `"..."` a backslash escapes only `$`, `` ` ``, `"`, `\` and newline. Adjacent quoted and plain
//! parts join into one word, and `''` is an empty word. (Linux itself only knows double quotes;
//! the rest is a superset that lets a command line carry any argument.)
//!
//! Meaning ([`BootArgs::parse`]), as Linux's `unknown_bootoption` and `--` handling do:
//! - words after the first `--` are the first program's arguments, verbatim;
//! - before it, the kernel's own parameters ([`KERNEL_PARAMS`]) are the kernel's; `rdinit=PATH`
//!   (or `init=PATH`) names the program to run from the initramfs;
//! - any other `NAME=VALUE` word becomes an environment variable of the first program (a later one
//!   replaces an earlier one of the same name); names with a dot before the `=` are module
//!   parameters to Linux and are ignored here too;
//! - any other bare word becomes an argument of the first program, before those after `--`.
use alloc::string::String;
use alloc::vec::Vec;

/// Why a command line cannot be split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuoteError {
    /// A `'` without its closing `'`.
    UnterminatedSingleQuote,
    /// A `"` without its closing `"`.
    UnterminatedDoubleQuote,
    /// A backslash as the last character.
    TrailingBackslash,
}

impl core::fmt::Display for QuoteError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::UnterminatedSingleQuote => "a ' is not closed",
            Self::UnterminatedDoubleQuote => "a \" is not closed",
            Self::TrailingBackslash => "the line ends with a backslash",
        })
    }
}

/// Splits `line` into words with the shell's quoting rules (see the module documentation).
///
/// # Errors
/// An unterminated quote or a trailing backslash.
pub fn split(line: &str) -> Result<Vec<String>, QuoteError> {
    let mut words = Vec::new();
    let mut word = String::new();
    // A word exists once any part of it was seen, even an empty quoted one (`''`).
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                if in_word {
                    words.push(core::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {} // a line continuation
                    Some(next) => word.push(next),
                    None => return Err(QuoteError::TrailingBackslash),
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(inner) => word.push(inner),
                        None => return Err(QuoteError::UnterminatedSingleQuote),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('$' | '`' | '"' | '\\')) => word.push(e),
                            Some('\n') => {}
                            Some(other) => {
                                word.push('\\');
                                word.push(other);
                            }
                            None => return Err(QuoteError::UnterminatedDoubleQuote),
                        },
                        Some(inner) => word.push(inner),
                        None => return Err(QuoteError::UnterminatedDoubleQuote),
                    }
                }
            }
            other => {
                in_word = true;
                word.push(other);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// Parameters this kernel takes for itself (with or without `=VALUE`), plus the common Linux ones
/// boot loaders add, which must not leak into the first program's arguments or environment.
pub const KERNEL_PARAMS: &[&str] = &[
    "test",
    "selftest",
    "bench",
    "failslab",
    "rdinit",
    "init",
    "console",
    "earlycon",
    "earlyprintk",
    "root",
    "rootwait",
    "rootfstype",
    "rw",
    "ro",
    "quiet",
    "loglevel",
    "debug",
    "nokaslr",
    "norandmaps",
];

/// The environment Linux gives the first program before boot parameters are added
/// (`envp_init` in `init/main.c`).
pub const DEFAULT_ENV: &[&str] = &["HOME=/", "TERM=linux"];

/// What the command line says, sorted by who it is for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BootArgs {
    /// The kernel's own parameters (words before `--` named in [`KERNEL_PARAMS`]), as written.
    pub kernel: Vec<String>,
    /// `rdinit=` (else `init=`): the program to run, as a path in the initramfs.
    pub rdinit: Option<String>,
    /// The first program's arguments after its name: bare unknown words, then the words after `--`.
    pub args: Vec<String>,
    /// The first program's environment: [`DEFAULT_ENV`] with the `NAME=VALUE` parameters applied.
    pub env: Vec<String>,
}

impl BootArgs {
    /// Parses a whole command line (`/chosen/bootargs`).
    ///
    /// # Errors
    /// The quoting problem, if the line cannot be split.
    pub fn parse(line: &str) -> Result<Self, QuoteError> {
        let mut out = Self { env: DEFAULT_ENV.iter().map(|s| String::from(*s)).collect(), ..Self::default() };
        let mut init = None;
        let mut words = split(line)?.into_iter();
        for word in words.by_ref() {
            if word == "--" {
                break;
            }
            let (name, value) = match word.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (word.as_str(), None),
            };
            if KERNEL_PARAMS.contains(&name) {
                match (name, value) {
                    ("rdinit", Some(v)) => out.rdinit = Some(String::from(v)),
                    ("init", Some(v)) => init = Some(String::from(v)),
                    _ => {}
                }
                out.kernel.push(word);
            } else if name.contains('.') {
                // A module parameter (`8250.nr_uarts=1`): Linux gives it to the module, never to init.
            } else if value.is_some() {
                let prefix_len = name.len() + 1;
                let prefix = &word.as_bytes()[..prefix_len];
                match out.env.iter_mut().find(|e| e.as_bytes().starts_with(prefix)) {
                    Some(existing) => *existing = word,
                    None => out.env.push(word),
                }
            } else {
                out.args.push(word);
            }
        }
        out.args.extend(words);
        if out.rdinit.is_none() {
            out.rdinit = init;
        }
        Ok(out)
    }

    /// Whether the kernel parameter `word` (e.g. `bench`, `selftest=fault`) was given.
    pub fn has_kernel_param(&self, word: &str) -> bool {
        self.kernel.iter().any(|w| w == word)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn words(line: &str) -> Vec<String> {
        split(line).unwrap()
    }

    #[test]
    fn blanks_separate_words_and_runs_of_blanks_count_once() {
        assert_eq!(words("  a  b\tc\n"), vec!["a", "b", "c"]);
        assert!(words("").is_empty());
        assert!(words("   ").is_empty());
    }

    #[test]
    fn single_quotes_keep_everything_literally() {
        assert_eq!(words(r#"'a b' 'x\y' '"'"#), vec!["a b", r"x\y", "\""]);
    }

    #[test]
    fn double_quotes_escape_only_the_shell_specials() {
        assert_eq!(words(r#""a b" "q\"q" "b\\s" "\n\$""#), vec!["a b", "q\"q", r"b\s", r"\n$"]);
    }

    #[test]
    fn a_backslash_outside_quotes_makes_the_next_character_literal() {
        assert_eq!(words(r"a\ b c\'d \\"), vec!["a b", "c'd", "\\"]);
        assert_eq!(words("a\\\nb"), vec!["ab"]);
    }

    #[test]
    fn adjacent_parts_join_and_empty_quotes_make_an_empty_word() {
        assert_eq!(words(r#"a'b'"c"d '' """#), vec!["abcd", "", ""]);
        assert_eq!(words("x=''"), vec!["x="]);
    }

    #[test]
    fn unterminated_quotes_and_trailing_backslashes_are_errors() {
        assert_eq!(split("'abc"), Err(QuoteError::UnterminatedSingleQuote));
        assert_eq!(split("\"abc"), Err(QuoteError::UnterminatedDoubleQuote));
        assert_eq!(split("\"abc\\"), Err(QuoteError::UnterminatedDoubleQuote));
        assert_eq!(split("abc\\"), Err(QuoteError::TrailingBackslash));
    }

    #[test]
    fn words_after_the_double_dash_are_the_programs_arguments_verbatim() {
        let b = BootArgs::parse("selftest=x -- sh -c 'echo $((1+2))' A=B --").unwrap();
        assert_eq!(b.args, vec!["sh", "-c", "echo $((1+2))", "A=B", "--"]);
        assert_eq!(b.kernel, vec!["selftest=x"]);
        assert_eq!(b.env, vec!["HOME=/", "TERM=linux"]);
    }

    #[test]
    fn unknown_name_value_words_become_the_environment_and_later_ones_replace() {
        let b = BootArgs::parse("FOO=1 TERM=vt100 BAR='a b' FOO=2 -- x").unwrap();
        assert_eq!(b.env, vec!["HOME=/", "TERM=vt100", "FOO=2", "BAR=a b"]);
        assert_eq!(b.args, vec!["x"]);
    }

    #[test]
    fn a_variable_named_like_a_prefix_of_another_does_not_replace_it() {
        let b = BootArgs::parse("HOMEDIR=/x HOM=y").unwrap();
        assert_eq!(b.env, vec!["HOME=/", "TERM=linux", "HOMEDIR=/x", "HOM=y"]);
    }

    #[test]
    fn module_parameters_are_dropped_and_bare_unknown_words_become_arguments() {
        let b = BootArgs::parse("8250.nr_uarts=1 console=ttyS0 single quiet -- two").unwrap();
        assert_eq!(b.args, vec!["single", "two"]);
        assert_eq!(b.kernel, vec!["console=ttyS0", "quiet"]);
        assert_eq!(b.env.len(), 2);
    }

    #[test]
    fn rdinit_names_the_program_and_wins_over_init() {
        let b = BootArgs::parse("init=/sbin/init rdinit=/bin/sh").unwrap();
        assert_eq!(b.rdinit.as_deref(), Some("/bin/sh"));
        let b = BootArgs::parse("init=/sbin/init").unwrap();
        assert_eq!(b.rdinit.as_deref(), Some("/sbin/init"));
        assert_eq!(BootArgs::parse("").unwrap().rdinit, None);
        assert!(BootArgs::parse("bench").unwrap().has_kernel_param("bench"));
        assert!(!BootArgs::parse("-- bench").unwrap().has_kernel_param("bench"));
    }

    #[test]
    fn a_quoting_error_is_reported_not_guessed() {
        assert_eq!(BootArgs::parse("-- 'oops"), Err(QuoteError::UnterminatedSingleQuote));
    }
}
