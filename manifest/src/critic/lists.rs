//! One short list per task, all in one vector: a `Vec` per task costs 24 bytes even empty, and
//! most tasks of a large plan read nothing.

use std::ops::Index;

/// The lists of tasks `0..n`, in task order; `lists[i]` is task `i`'s.
pub(crate) struct Lists<T> {
    /// Where each task's list starts in `items`; one more entry than tasks, for the last end.
    starts: Vec<u32>,
    items: Vec<T>,
}

impl<T> Lists<T> {
    /// The lists made by `list`, called once per task in order, which appends task `i`'s items.
    pub(crate) fn build(n: usize, mut list: impl FnMut(usize, &mut Vec<T>)) -> Self {
        let mut starts = Vec::with_capacity(n + 1);
        let mut items = Vec::new();
        starts.push(0);
        for i in 0..n {
            list(i, &mut items);
            // The items are at most a few per dependency of a plan of at most 32 MiB.
            starts.push(u32::try_from(items.len()).unwrap_or(u32::MAX));
        }
        items.shrink_to_fit();
        Lists { starts, items }
    }

    /// The lists in task order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[T]> {
        (0..self.starts.len() - 1).map(|i| &self[i])
    }
}

impl<T> Index<usize> for Lists<T> {
    type Output = [T];

    fn index(&self, task: usize) -> &[T] {
        &self.items[self.starts[task] as usize..self.starts[task + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_task_gets_the_items_appended_for_it() {
        let lists = Lists::build(4, |i, items| items.extend((0..i % 3).map(|k| (i, k))));
        assert_eq!(&lists[0], &[]);
        assert_eq!(&lists[2], &[(2, 0), (2, 1)]);
        assert_eq!(&lists[3], &[]);
        assert_eq!(lists.iter().map(<[_]>::len).collect::<Vec<_>>(), [0, 1, 2, 0]);
    }
}
