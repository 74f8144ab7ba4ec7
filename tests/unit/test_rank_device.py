"""A rank's device index from what the launcher bound (parallel/dist.py bound_device_index):
one visible device is index 0 (srun --gpus-per-task=1), several are indexed by LOCAL_RANK, and
an index that does not exist is refused in one line naming what the process sees."""

import pytest

from accelbench.parallel.dist import bound_device_index


def test_one_bound_device_is_index_zero_whatever_the_local_rank():
    assert bound_device_index(3, "cuda", 1, {"CUDA_VISIBLE_DEVICES": "3"}) == 0


def test_several_visible_devices_are_indexed_by_the_local_rank():
    assert bound_device_index(2, "cuda", 4, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}) == 2
    assert bound_device_index(1, "cuda", 8, {}) == 1


def test_an_index_that_does_not_exist_is_refused_in_one_line():
    with pytest.raises(ValueError) as err:
        bound_device_index(5, "cuda", 4, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    text = str(err.value)
    assert "\n" not in text and "LOCAL_RANK=5" in text and "CUDA_VISIBLE_DEVICES=0,1,2,3" in text


def test_no_device_visible_is_refused():
    with pytest.raises(ValueError, match="sees 0"):
        bound_device_index(0, "cuda", 0, {"CUDA_VISIBLE_DEVICES": ""})
