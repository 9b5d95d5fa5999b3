//! gen
