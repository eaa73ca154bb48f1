//! The maps of a run as the page draws them: each expanded map task with its item tasks
//! (`ID[INDEX]`) in order and how many of them have each status, so the page can draw the map
//! as one node with its counts and, expanded, each item.

use std::collections::BTreeMap;

use engine::RunState;
use manifest::template::{item_id, map_of_item};
use serde::Serialize;

/// One expanded map task.
#[derive(Debug, Serialize)]
pub struct MapView {
    /// Its item tasks' ids, in item order.
    items: Vec<String>,
    /// How many of its items have each status (statuses no item has are left out).
    counts: BTreeMap<&'static str, usize>,
}

impl MapView {
    /// Map task `map` of `state`, if it has expanded.
    fn of(state: &RunState, map: &str) -> Option<Self> {
        let count = state.maps.get(map)?.len();
        let items: Vec<String> = (0..count).map(|index| item_id(map, index)).collect();
        let mut counts = BTreeMap::new();
        for id in &items {
            if let Some(i) = state.index_of(id) {
                *counts.entry(state.tasks[i].status.as_str()).or_default() += 1;
            }
        }
        Some(MapView { items, counts })
    }
}

/// Every map of `state` that has expanded, by map task id.
pub fn all(state: &RunState) -> BTreeMap<String, MapView> {
    state.maps.keys().filter_map(|map| Some((map.clone(), MapView::of(state, map)?))).collect()
}

/// The expanded maps that `tasks` are or belong to, by map task id.
pub fn touched<'a>(state: &RunState, tasks: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, MapView> {
    let mut maps = BTreeMap::new();
    for task in tasks {
        let map = match map_of_item(task) {
            Some(map) if state.maps.contains_key(map) => map,
            _ => task,
        };
        if !maps.contains_key(map)
            && let Some(view) = MapView::of(state, map)
        {
            maps.insert(map.to_owned(), view);
        }
    }
    maps
}
