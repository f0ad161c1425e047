//! The kernel `.config`: which options are built in (`y`), modular (`m`) or set to a value.
//!
//! Used twice: by the Kbuild reader (which objects a module links) and by the preprocessor
//! (`#ifdef CONFIG_X`, `IS_ENABLED(CONFIG_X)`), so that the graph follows the code the
//! distribution kernel actually runs (Debian has `CONFIG_SECURITY_INFINIBAND` off).

use rustc_hash::{FxHashMap, FxHashSet};
use std::path::Path;

use crate::error::AnalyzerError;

/// One option's value as written in `.config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigValue {
    BuiltIn,
    Module,
    Other(String),
}

/// Parsed `.config`. An option absent from the file is "not set".
#[derive(Debug, Clone, Default)]
pub struct KernelConfig {
    // Hashed, not ordered: ~11k options are read once and looked up per `#if` and per file key
    // (the ordered map took 4-5 ms of a cold load's serial setup).
    values: FxHashMap<String, ConfigValue>,
    /// Options written as `# CONFIG_X is not set`: Kconfig writes every visible option, so
    /// one in neither map is one the file lacks (a truncated `.config`).
    unset: FxHashSet<String>,
    /// Where it came from, for messages; `None` for an empty (all-off) config.
    pub source: Option<String>,
}

impl KernelConfig {
    pub fn load(path: &Path) -> Result<Self, AnalyzerError> {
        let bytes = std::fs::read(path).map_err(|e| AnalyzerError::io(path, e))?;
        let text = String::from_utf8_lossy(&bytes);
        let mut cfg = Self::parse(&text);
        cfg.source = Some(path.display().to_string());
        Ok(cfg)
    }

    pub fn parse(text: &str) -> Self {
        let mut values = FxHashMap::default();
        let mut unset = FxHashSet::default();
        for line in text.lines() {
            let line = line.trim();
            if let Some(name) = line
                .strip_prefix("# ")
                .and_then(|l| l.strip_suffix(" is not set"))
            {
                unset.insert(name.to_string());
                continue;
            }
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            let value = match value {
                "y" => ConfigValue::BuiltIn,
                "m" => ConfigValue::Module,
                other => ConfigValue::Other(other.trim_matches('"').to_string()),
            };
            values.insert(name.to_string(), value);
        }
        Self {
            values,
            unset,
            source: None,
        }
    }

    /// Whether the file names the option at all (set, or `# CONFIG_X is not set`).
    pub fn mentions(&self, name: &str) -> bool {
        self.values.contains_key(name) || self.unset.contains(name)
    }

    /// Test helper and CLI override: set an option by name (with `CONFIG_` prefix).
    pub fn set(&mut self, name: &str, value: ConfigValue) {
        self.values.insert(name.to_string(), value);
    }

    pub fn get(&self, name: &str) -> Option<&ConfigValue> {
        self.values.get(name)
    }

    /// `IS_ENABLED()`: built in or modular.
    pub fn is_enabled(&self, name: &str) -> bool {
        matches!(
            self.get(name),
            Some(ConfigValue::BuiltIn | ConfigValue::Module)
        )
    }

    /// The letter Kbuild substitutes for `$(CONFIG_X)`: "y", "m" or "".
    pub fn kbuild_letter(&self, name: &str) -> &str {
        match self.get(name) {
            Some(ConfigValue::BuiltIn) => "y",
            Some(ConfigValue::Module) => "m",
            Some(ConfigValue::Other(v)) => v.as_str(),
            None => "",
        }
    }

    /// Whether `autoconf.h` defines this macro: `CONFIG_X` for y or a value,
    /// `CONFIG_X_MODULE` for m.
    pub fn defines(&self, macro_name: &str) -> bool {
        match self.get(macro_name) {
            Some(ConfigValue::BuiltIn | ConfigValue::Other(_)) => true,
            Some(ConfigValue::Module) => false,
            None => macro_name
                .strip_suffix("_MODULE")
                .is_some_and(|base| self.get(base) == Some(&ConfigValue::Module)),
        }
    }

    /// Integer value of `CONFIG_X` in an `#if` expression (1 for y, the number for ints).
    pub fn int_value(&self, macro_name: &str) -> i64 {
        match self.get(macro_name) {
            Some(ConfigValue::BuiltIn) => 1,
            Some(ConfigValue::Module) => 0,
            Some(ConfigValue::Other(v)) => parse_c_int(v).unwrap_or(0),
            None => 0,
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

pub(crate) fn parse_c_int(s: &str) -> Option<i64> {
    let s = s.trim().trim_end_matches(['u', 'U', 'l', 'L']);
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16).ok()
    } else {
        s.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tristate_and_autoconf_semantics() {
        let cfg = KernelConfig::parse(
            "CONFIG_A=y\nCONFIG_B=m\n# CONFIG_C is not set\nCONFIG_D=\"x\"\nCONFIG_N=0x10\n",
        );
        assert!(cfg.is_enabled("CONFIG_A") && cfg.is_enabled("CONFIG_B"));
        assert!(!cfg.is_enabled("CONFIG_C"));
        assert!(cfg.defines("CONFIG_A"));
        assert!(
            !cfg.defines("CONFIG_B"),
            "a module option defines only _MODULE"
        );
        assert!(cfg.defines("CONFIG_B_MODULE"));
        assert_eq!(cfg.kbuild_letter("CONFIG_B"), "m");
        assert_eq!(cfg.kbuild_letter("CONFIG_C"), "");
        assert_eq!(cfg.int_value("CONFIG_N"), 16);
    }
}
