//! Reports of bench output directories (being written).
