//! author
