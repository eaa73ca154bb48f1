//! Running a plan.
