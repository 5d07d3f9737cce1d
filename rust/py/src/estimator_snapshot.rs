//! The estimator's settings and its snapshot formats (ADR 0001, ADR 0012):
//! version 1 (settings and reconciled sums) and version 2 (adds the caller's
//! counting table and the calibration samples). `read` accepts both; `write`
//! writes the lowest version that holds the state. The twin is
//! `ctxengine/reference/snapshot.py`.

use ctxengine_core::calibrate;
use ctxengine_core::estimate::{EstimatorState, Profile, Reconciled};
use ctxengine_core::tokenize::table::EncodingTable;
use ctxengine_core::tokenize::Method;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMapping, PyString, PyTuple};

use crate::errors::{estimator_error, IntoPy};
use crate::tokenize;

/// An int that is not a bool.
pub fn is_int(obj: &Bound<'_, PyAny>) -> bool {
    let ptr = obj.as_ptr();
    unsafe { ffi::PyLong_Check(ptr) != 0 && ffi::PyBool_Check(ptr) == 0 }
}

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

pub fn repr(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(obj.repr()?.to_string_lossy().into_owned())
}

/// A positive finite number (an int or a float, not a bool), as a float.
fn check_bytes_per_token(py: Python<'_>, value: &Bound<'_, PyAny>, place: &str) -> PyResult<f64> {
    let ptr = value.as_ptr();
    let numeric = unsafe {
        ffi::PyBool_Check(ptr) == 0 && (ffi::PyFloat_Check(ptr) != 0 || ffi::PyLong_Check(ptr) != 0)
    };
    if !numeric {
        return Err(estimator_error(
            py,
            format!("{place}: expected a number, got {}", type_name(value)),
        ));
    }
    let number: f64 = value.extract()?;
    if !(number.is_finite() && number > 0.0) {
        return Err(estimator_error(
            py,
            format!(
                "{place}: must be a positive finite number, got {}",
                repr(value)?
            ),
        ));
    }
    Ok(number)
}

/// A non-negative int (not a bool).
fn check_count(py: Python<'_>, value: &Bound<'_, PyAny>, place: &str) -> PyResult<i64> {
    check_count_max(py, value, place, i64::MAX)
}

/// A non-negative int (not a bool) up to `max`.
fn check_count_max(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    place: &str,
    max: i64,
) -> PyResult<i64> {
    if !is_int(value) {
        return Err(estimator_error(
            py,
            format!("{place}: expected an int, got {}", type_name(value)),
        ));
    }
    match value.extract::<i64>() {
        Ok(v) if (0..=max).contains(&v) => Ok(v),
        Ok(v) if v > max => Err(estimator_error(
            py,
            format!("{place}: out of range, got {v}"),
        )),
        Ok(v) => Err(estimator_error(
            py,
            format!("{place}: must not be negative, got {v}"),
        )),
        Err(_) => Err(estimator_error(
            py,
            format!("{place}: out of range, got {}", repr(value)?),
        )),
    }
}

/// The `(key, value)` pairs of a mapping.
type Members<'py> = Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>;

/// `(key, value)` pairs of a dict or any `collections.abc.Mapping`, or
/// `None` when `obj` is not a mapping.
fn mapping_items<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Members<'py>>> {
    if let Ok(d) = obj.cast::<PyDict>() {
        return Ok(Some(d.iter().collect()));
    }
    if obj.cast::<PyMapping>().is_err() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for pair in obj.call_method0("items")?.try_iter()? {
        let (k, v): (Bound<'py, PyAny>, Bound<'py, PyAny>) = pair?.extract()?;
        out.push((k, v));
    }
    Ok(Some(out))
}

/// A list or tuple of exactly two elements.
fn two<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
    let seq = obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>();
    if seq && obj.len()? == 2 {
        return Ok(Some((obj.get_item(0)?, obj.get_item(1)?)));
    }
    Ok(None)
}

fn check_profiles(
    py: Python<'_>,
    profiles: &Bound<'_, PyAny>,
    place: &str,
) -> PyResult<Vec<(String, Profile)>> {
    let mut out: Vec<(String, Profile)> = Vec::new();
    if profiles.is_none() {
        return Ok(out);
    }
    let Some(items) = mapping_items(profiles)? else {
        return Err(estimator_error(
            py,
            format!("{place}: expected a mapping, got {}", type_name(profiles)),
        ));
    };
    for (prefix, profile) in items {
        if !prefix.is_instance_of::<PyString>() {
            return Err(estimator_error(
                py,
                format!("{place}: prefix {} is not a string", repr(&prefix)?),
            ));
        }
        let prefix_repr = repr(&prefix)?;
        let Some((bpt, framing)) = two(&profile)? else {
            return Err(estimator_error(
                py,
                format!("{place}[{prefix_repr}]: expected (bytes_per_token, framing_tokens)"),
            ));
        };
        let bpt =
            check_bytes_per_token(py, &bpt, &format!("{place}[{prefix_repr}].bytes_per_token"))?;
        let framing = check_count(
            py,
            &framing,
            &format!("{place}[{prefix_repr}].framing_tokens"),
        )?;
        let key = prefix.str()?;
        let Ok(key) = key.to_str().map(str::to_owned) else {
            return Err(estimator_error(
                py,
                format!("{place}: lone surrogate in prefix {prefix_repr}"),
            ));
        };
        let profile = Profile::new(bpt, framing).into_py(py)?;
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = profile,
            None => out.push((key, profile)),
        }
    }
    Ok(out)
}

/// The constructor's arguments, checked, as an estimator state.
pub fn settings(
    py: Python<'_>,
    bytes_per_token: &Bound<'_, PyAny>,
    framing_tokens: &Bound<'_, PyAny>,
    profiles: &Bound<'_, PyAny>,
    memo_capacity: &Bound<'_, PyAny>,
    encodings: Option<&Bound<'_, PyAny>>,
    place: &str,
) -> PyResult<EstimatorState> {
    let bpt = check_bytes_per_token(py, bytes_per_token, &format!("{place}bytes_per_token"))?;
    let framing = check_count(py, framing_tokens, &format!("{place}framing_tokens"))?;
    let profiles = check_profiles(py, profiles, &format!("{place}profiles"))?;
    let capacity = check_count(py, memo_capacity, &format!("{place}memo_capacity"))?;
    let table = tokenize::table(py, encodings, &format!("{place}encodings"))?;
    let default = Profile::new(bpt, framing).into_py(py)?;
    Ok(EstimatorState::with_table(
        default,
        profiles,
        capacity as usize,
        table,
    ))
}

/// One calibration key: its sums and sample window.
type Calibration = (String, Reconciled, Vec<(u64, u64)>);

/// What a snapshot holds, copied out of the state under its lock.
pub struct Parts {
    default: Profile,
    profiles: Vec<(String, Profile)>,
    capacity: usize,
    table: Vec<(String, Method)>,
    calibrations: Vec<Calibration>,
}

impl Parts {
    pub fn of(st: &EstimatorState) -> Self {
        Parts {
            default: st.default_profile(),
            profiles: st.profiles().to_vec(),
            capacity: st.memo().capacity(),
            table: st.table().extra().to_vec(),
            calibrations: st
                .calibrations()
                .iter()
                .map(|(k, sums, w)| (k.to_owned(), sums, w.to_vec()))
                .collect(),
        }
    }
}

/// The snapshot dict: version 1 unless the state needs version 2 and
/// `allow_v2` (else the table and the samples are left out).
pub fn write<'py>(py: Python<'py>, parts: &Parts, allow_v2: bool) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let v2 = allow_v2
        && (!parts.table.is_empty()
            || parts
                .calibrations
                .iter()
                .any(|(k, _, w)| !w.is_empty() || k.contains('#')));
    d.set_item("version", if v2 { 2 } else { 1 })?;
    d.set_item("bytes_per_token", parts.default.bytes_per_token)?;
    d.set_item("framing_tokens", parts.default.framing_tokens)?;
    let p = PyDict::new(py);
    for (prefix, profile) in &parts.profiles {
        let pair = PyList::new(
            py,
            [
                profile.bytes_per_token.into_pyobject(py)?.into_any(),
                profile.framing_tokens.into_pyobject(py)?.into_any(),
            ],
        )?;
        p.set_item(prefix, pair)?;
    }
    d.set_item("profiles", p)?;
    d.set_item("memo_capacity", parts.capacity)?;
    let c = PyDict::new(py);
    for (key, sums, _) in &parts.calibrations {
        c.set_item(key, PyList::new(py, [sums.estimated, sums.actual])?)?;
    }
    d.set_item("corrections", c)?;
    if v2 {
        let e = PyDict::new(py);
        for (prefix, method) in &parts.table {
            e.set_item(prefix, method.name())?;
        }
        d.set_item("encodings", e)?;
        let s = PyDict::new(py);
        for (key, _, window) in &parts.calibrations {
            if !window.is_empty() {
                let pairs: Vec<Bound<'_, PyList>> = window
                    .iter()
                    .map(|&(e, a)| PyList::new(py, [e, a]))
                    .collect::<PyResult<_>>()?;
                s.set_item(key, PyList::new(py, pairs)?)?;
            }
        }
        d.set_item("samples", s)?;
    }
    Ok(d)
}

const V1_KEYS: [&str; 6] = [
    "bytes_per_token",
    "corrections",
    "framing_tokens",
    "memo_capacity",
    "profiles",
    "version",
];
const V2_KEYS: [&str; 8] = [
    "bytes_per_token",
    "corrections",
    "encodings",
    "framing_tokens",
    "memo_capacity",
    "profiles",
    "samples",
    "version",
];

/// A key of `corrections` or `samples`: a string without a lone surrogate.
fn calibration_key(py: Python<'_>, key: &Bound<'_, PyAny>, place: &str) -> PyResult<String> {
    let Ok(s) = key.cast::<PyString>() else {
        return Err(estimator_error(
            py,
            format!("{place}: model id is not a string"),
        ));
    };
    s.to_str()
        .map(str::to_owned)
        .map_err(|_| estimator_error(py, format!("{place}: lone surrogate in model id")))
}

/// Check and decode a snapshot of any version ever written.
pub fn read(py: Python<'_>, snapshot: &Bound<'_, PyAny>) -> PyResult<EstimatorState> {
    let Some(members) = mapping_items(snapshot)? else {
        return Err(estimator_error(
            py,
            format!("snapshot: expected a mapping, got {}", type_name(snapshot)),
        ));
    };
    let version = members
        .iter()
        .find(|(k, _)| {
            k.cast::<PyString>()
                .is_ok_and(|s| s.to_str().ok() == Some("version"))
        })
        .map(|(_, v)| v.clone());
    if let Some(v) = version.as_ref().filter(|v| is_int(v)) {
        if !matches!(v.extract::<i64>().ok(), Some(1 | 2)) {
            return Err(estimator_error(
                py,
                format!("snapshot: unsupported version {}", repr(v)?),
            ));
        }
    }
    let says_two = version
        .as_ref()
        .is_some_and(|v| is_int(v) && v.extract::<i64>().ok() == Some(2));
    // The keys of the version it says it is (version 1's for anything else).
    let keys: &[&str] = if says_two { &V2_KEYS } else { &V1_KEYS };
    let mut found: Vec<Option<Bound<'_, PyAny>>> = vec![None; keys.len()];
    let mut unknown: Vec<String> = Vec::new();
    for (key, value) in &members {
        let name = key
            .cast::<PyString>()
            .ok()
            .and_then(|k| k.to_str().ok().map(str::to_owned));
        match name
            .as_deref()
            .and_then(|n| keys.iter().position(|k| *k == n))
        {
            Some(i) => found[i] = Some(value.clone()),
            None => unknown.push(key.str()?.to_string_lossy().into_owned()),
        }
    }
    let missing: Vec<&str> = keys
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_none())
        .map(|(k, _)| *k)
        .collect();
    if !missing.is_empty() {
        return Err(estimator_error(
            py,
            format!("snapshot: missing {}", missing.join(", ")),
        ));
    }
    if !unknown.is_empty() {
        unknown.sort();
        return Err(estimator_error(
            py,
            format!("snapshot: unknown key {}", unknown.join(", ")),
        ));
    }
    let field = |name: &str| -> Bound<'_, PyAny> {
        let i = keys.iter().position(|k| *k == name).unwrap_or(0);
        found[i].clone().unwrap_or_else(|| py.None().into_bound(py))
    };
    let version = field("version");
    let version_ok = is_int(&version) && matches!(version.extract::<i64>().ok(), Some(1 | 2));
    if !version_ok {
        return Err(estimator_error(
            py,
            format!("snapshot: unsupported version {}", repr(&version)?),
        ));
    }
    let bpt = check_bytes_per_token(py, &field("bytes_per_token"), "snapshot.bytes_per_token")?;
    let framing = check_count(py, &field("framing_tokens"), "snapshot.framing_tokens")?;
    let profiles = check_profiles(py, &field("profiles"), "snapshot.profiles")?;
    let capacity = check_count(py, &field("memo_capacity"), "snapshot.memo_capacity")?;
    let default = Profile::new(bpt, framing).into_py(py)?;
    let corrections = field("corrections");
    let Some(corrections) = mapping_items(&corrections)? else {
        return Err(estimator_error(
            py,
            "snapshot.corrections: expected a mapping",
        ));
    };
    let mut restored: Vec<(String, Reconciled)> = Vec::new();
    for (key, sums) in corrections {
        let place = format!("snapshot.corrections[{}]", repr(&key)?);
        let key = calibration_key(py, &key, &place)?;
        let Some((e, a)) = two(&sums)? else {
            return Err(estimator_error(
                py,
                format!("{place}: expected [estimated, actual]"),
            ));
        };
        let e = check_count(py, &e, &format!("{place}.estimated"))?;
        let a = check_count(py, &a, &format!("{place}.actual"))?;
        let sums = Reconciled {
            estimated: e as u64,
            actual: a as u64,
        };
        match restored.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = sums,
            None => restored.push((key, sums)),
        }
    }
    let (table, mut windows) = if says_two {
        let table = tokenize::table(py, Some(&field("encodings")), "snapshot.encodings")?;
        (table, read_samples(py, &field("samples"), &restored)?)
    } else {
        (EncodingTable::default(), Vec::new())
    };
    let mut st = EstimatorState::with_table(default, profiles, capacity as usize, table);
    for (key, sums) in restored {
        let window = windows
            .iter()
            .position(|(k, _)| *k == key)
            .map(|i| windows.swap_remove(i).1)
            .unwrap_or_default();
        st.set_calibration(&key, sums, window);
    }
    Ok(st)
}

type Windows = Vec<(String, Vec<(u64, u64)>)>;

fn read_samples(
    py: Python<'_>,
    samples: &Bound<'_, PyAny>,
    corrections: &[(String, Reconciled)],
) -> PyResult<Windows> {
    let Some(samples) = mapping_items(samples)? else {
        return Err(estimator_error(py, "snapshot.samples: expected a mapping"));
    };
    let mut out: Windows = Vec::new();
    for (key, window) in samples {
        let place = format!("snapshot.samples[{}]", repr(&key)?);
        let key = calibration_key(py, &key, &place)?;
        if !corrections.iter().any(|(k, _)| *k == key) {
            return Err(estimator_error(
                py,
                format!("{place}: no reconciled sums for this model"),
            ));
        }
        let seq = window.is_instance_of::<PyList>() || window.is_instance_of::<PyTuple>();
        if !seq || window.len()? > calibrate::WINDOW {
            return Err(estimator_error(
                py,
                format!(
                    "{place}: expected at most {} [estimated, actual] pairs",
                    calibrate::WINDOW
                ),
            ));
        }
        let mut pairs = Vec::new();
        for (i, pair) in window.try_iter()?.enumerate() {
            let pair = pair?;
            let Some((e, a)) = two(&pair)? else {
                return Err(estimator_error(
                    py,
                    format!("{place}[{i}]: expected [estimated, actual]"),
                ));
            };
            let e = check_count_max(
                py,
                &e,
                &format!("{place}[{i}].estimated"),
                calibrate::STORED_MAX as i64,
            )?;
            let a = check_count_max(
                py,
                &a,
                &format!("{place}[{i}].actual"),
                calibrate::SAMPLE_MAX as i64,
            )?;
            if e == 0 {
                return Err(estimator_error(
                    py,
                    format!("{place}[{i}].estimated: must be positive, got 0"),
                ));
            }
            pairs.push((e as u64, a as u64));
        }
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = pairs,
            None => out.push((key, pairs)),
        }
    }
    Ok(out)
}
