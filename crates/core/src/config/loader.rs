//! The only I/O in `config`: which files make up the config and their contents
//! (`docs/design/contract.md#config-files`). Names follow goruntime's snapshot keys — the path
//! relative to the walk root with `/` turned into `.` — because error texts and the `config.`
//! prefix filter depend on them.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::validate::ConfigFile;
use super::yaml_budget::{self, DEFAULT_MAX_FILE_BYTES};

/// A file or directory that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: {source}", path.display())]
pub struct LoadError {
    /// The path that failed.
    pub path: PathBuf,
    /// The underlying error.
    #[source]
    pub source: io::Error,
}

/// How config files are read: which names are skipped and how large a file may be. Passed to
/// every load, so `ratelimitd validate` and the server's reloads refuse the same files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// Skip files and directories whose name starts with `.` (`RUNTIME_IGNOREDOTFILES`).
    pub ignore_dotfiles: bool,
    /// The largest config file read, in bytes (`CONFIG_MAX_FILE_BYTES`); a larger one is
    /// refused unread.
    pub max_file_bytes: u64,
}

impl Default for LoadOptions {
    /// Dotfiles are read; files up to [`DEFAULT_MAX_FILE_BYTES`].
    fn default() -> LoadOptions {
        LoadOptions {
            ignore_dotfiles: false,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
        }
    }
}

impl LoadError {
    fn at(path: &Path) -> impl FnOnce(io::Error) -> LoadError + '_ {
        move |source| LoadError {
            path: path.to_owned(),
            source,
        }
    }
}

/// Reads a config file or directory (`ratelimitd validate`, `config_check_cmd`). A file becomes one
/// [`ConfigFile`] named by `path` as given, whatever its extension; a directory is walked
/// recursively and every `*.yaml`/`*.yml` file is read (other files are skipped), named relative to it (`config/basic.yaml` → `config.basic.yaml`),
/// sorted by name.
///
/// ```
/// use ratelimitd_core::config::LoadOptions;
/// use ratelimitd_core::{CompileOptions, compile, load_path};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// std::fs::create_dir(dir.path().join("config"))?;
/// std::fs::write(
///     dir.path().join("config/api.yaml"),
///     "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 100}\n",
/// )?;
/// std::fs::write(dir.path().join("config/README.md"), "not a config file")?;
///
/// let files = load_path(dir.path(), &LoadOptions::default())?;
/// let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
/// assert_eq!(names, ["config.api.yaml"]);
/// let config = compile(&files, &CompileOptions::default())?;
/// assert!(config.domain("api").is_some());
///
/// // A path that cannot be read is an error naming it.
/// let missing = dir.path().join("missing.yaml");
/// let error = load_path(&missing, &LoadOptions::default()).unwrap_err();
/// assert_eq!(error.path, missing);
/// # Ok(())
/// # }
/// ```
pub fn load_path(path: &Path, options: &LoadOptions) -> Result<Vec<ConfigFile>, LoadError> {
    let meta = fs::metadata(path).map_err(LoadError::at(path))?;
    if meta.is_dir() {
        return walk_sorted(path, options);
    }
    Ok(vec![ConfigFile {
        name: path.to_string_lossy().into_owned(),
        contents: read_bounded(path, options.max_file_bytes)?,
    }])
}

/// Finds the runtime config files the Go service would load
/// (`docs/design/contract.md#config-files`).
///
/// With `watch_root`, the walk root is `root/subdirectory` and only names starting with
/// `appdirectory.` are kept (`config.basic.yaml`); an empty `subdirectory` loads nothing, as
/// goruntime then uses a nil loader. Without it, the walk root is
/// `root/subdirectory/appdirectory` and every YAML file counts (`basic.yaml`). A missing walk root
/// gives no files, not an error.
pub fn load_runtime(
    root: &Path,
    subdirectory: &str,
    appdirectory: &str,
    watch_root: bool,
    options: &LoadOptions,
) -> Result<Vec<ConfigFile>, LoadError> {
    if watch_root {
        if subdirectory.is_empty() {
            return Ok(Vec::new());
        }
        let prefix = format!("{appdirectory}.");
        let walk_root = root.join(subdirectory);
        let mut files = walk_if_dir(&walk_root, options)?;
        files.retain(|f| f.name.starts_with(&prefix));
        Ok(files)
    } else {
        walk_if_dir(&root.join(subdirectory).join(appdirectory), options)
    }
}

/// Walks `dir` if it is a directory; anything else (usually: missing) yields no files.
fn walk_if_dir(dir: &Path, options: &LoadOptions) -> Result<Vec<ConfigFile>, LoadError> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => walk_sorted(dir, options),
        Ok(_) => Ok(Vec::new()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(LoadError::at(dir)(e)),
    }
}

fn walk_sorted(dir: &Path, options: &LoadOptions) -> Result<Vec<ConfigFile>, LoadError> {
    let mut files = Vec::new();
    walk(dir, "", options, &mut files)?;
    // Go loads in map order (random); sorting makes merges and error order reproducible.
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// Appends every file under `dir`, named `prefix` + its relative dotted name.
fn walk(
    dir: &Path,
    prefix: &str,
    options: &LoadOptions,
    out: &mut Vec<ConfigFile>,
) -> Result<(), LoadError> {
    for entry in fs::read_dir(dir).map_err(LoadError::at(dir))? {
        let entry = entry.map_err(LoadError::at(dir))?;
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        if options.ignore_dotfiles && file_name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let name = format!("{prefix}{file_name}");
        let kind = entry.file_type().map_err(LoadError::at(&path))?;
        if kind.is_dir() {
            walk(&path, &format!("{name}."), options, out)?;
            continue;
        }
        if kind.is_symlink() {
            // Symlinked files are followed. A symlinked directory (Kubernetes' `..data`) or a
            // dangling link fails to read in goruntime and is skipped; walking into it instead
            // could load files twice or loop.
            match fs::metadata(&path) {
                Ok(meta) if meta.is_file() => {}
                _ => continue,
            }
        } else if !kind.is_file() {
            continue;
        }
        if !is_yaml_name(&file_name) {
            // goruntime reads every file whatever its name; skipping editor backups, `.bak`
            // copies and stray scripts is what keeps `cp api.yaml api.yaml.bak` from freezing
            // reloads with a duplicate domain.
            continue;
        }
        let contents = read_bounded(&path, options.max_file_bytes)?;
        out.push(ConfigFile { name, contents });
    }
    Ok(())
}

/// Whether a file in a config directory is read: `*.yaml` or `*.yml`, any case.
fn is_yaml_name(file_name: &str) -> bool {
    let lower = file_name.to_ascii_lowercase();
    lower.ends_with(".yaml") || lower.ends_with(".yml")
}

/// Reads one config file, refusing (with the file named and the reason) one over `max` bytes
/// (`CONFIG_MAX_FILE_BYTES`) or whose YAML expands past the node budget, before any value is
/// built. Reading stops at the cap even if the file grows after its size was checked.
fn read_bounded(path: &Path, max: u64) -> Result<String, LoadError> {
    use std::io::Read;
    let refuse =
        |reason: String| LoadError::at(path)(io::Error::new(io::ErrorKind::InvalidData, reason));
    let too_big = |size: u64| {
        refuse(format!(
            "the file is {size} bytes, over the {max}-byte limit for a config file \
             (CONFIG_MAX_FILE_BYTES); raise it, or split the domain's descriptors over several \
             files with MERGE_DOMAIN_CONFIG=true"
        ))
    };
    let file = fs::File::open(path).map_err(LoadError::at(path))?;
    let size = file.metadata().map_err(LoadError::at(path))?.len();
    if size > max {
        return Err(too_big(size));
    }
    let mut contents = String::new();
    file.take(max.saturating_add(1))
        .read_to_string(&mut contents)
        .map_err(LoadError::at(path))?;
    if contents.len() as u64 > max {
        return Err(too_big(contents.len() as u64));
    }
    yaml_budget::check_nodes(&contents).map_err(refuse)?;
    Ok(contents)
}
