//! Observations read from CSV: the factor columns and the response column of each row.

use std::io::Read;

use super::{AnovaError, Observation};

/// Read observations from CSV text with a header row: the factor columns (any text) and a numeric
/// response column. Extra columns are ignored.
pub fn read_csv(
    input: impl Read,
    response: &str,
    factors: &[String],
) -> Result<Vec<Observation>, AnovaError> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(input);
    let header = reader.headers()?.clone();
    let find = |name: &str| -> Result<usize, AnovaError> {
        header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| AnovaError::MissingColumn {
                column: name.to_string(),
                available: header.iter().collect::<Vec<_>>().join(", "),
            })
    };
    let response_col = find(response)?;
    let factor_cols = factors
        .iter()
        .map(|f| find(f))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record?;
        let line = record.position().map(|p| p.line()).unwrap_or(0);
        let text = record.get(response_col).unwrap_or("");
        let value = text
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| AnovaError::NotNumeric {
                line,
                column: response.to_string(),
                value: text.to_string(),
            })?;
        let levels = factor_cols
            .iter()
            .map(|&c| record.get(c).unwrap_or("").to_string())
            .collect();
        out.push(Observation {
            levels,
            response: value,
            line,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn csv_errors_are_clear() {
        let text = "method,rate,tput\nring,1,5.5\ncopy,1,abc\n";
        let msg = read_csv(text.as_bytes(), "tput", &names(&["method"]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            msg,
            "line 3: response `tput` is `abc`, not a finite number; fix or remove that row"
        );
        let msg = read_csv(text.as_bytes(), "tput", &names(&["speed"]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            msg,
            "column `speed` is not in the CSV header; the columns are: method, rate, tput"
        );
        let rows = read_csv(
            "method, rate ,tput\nring,1, 5.5\n".as_bytes(),
            "tput",
            &names(&["rate", "method"]),
        )
        .unwrap();
        assert_eq!(rows[0].levels, ["1", "ring"]);
        assert_eq!(rows[0].response, 5.5);
        assert_eq!(rows[0].line, 2);
    }
}
