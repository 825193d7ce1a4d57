"""Per-row edits against element-by-element references: each row gets its own variant and value."""

import numpy as np
import torch

from proclab.interpret.steering.rows import AddLevelVector, AddVector, WriteSites


def test_add_vector_per_row_coefficient():
    g = torch.Generator().manual_seed(0)
    rows, vector = torch.randn(4, 3, 2, 5, generator=g), torch.randn(3, 2, 5, generator=g)
    values = torch.tensor([0.0, 1.0, -2.0, 0.5])
    got = AddVector(vector)(rows, values).numpy()
    for r in range(4):
        np.testing.assert_allclose(got[r], rows[r].numpy() + values[r].item() * vector.numpy(), rtol=1e-6)
    assert torch.equal(AddVector(vector)(rows, torch.zeros(4)), rows)  # coefficient 0: exactly the input
    across = torch.randn(3, generator=g)
    got = AddVector(across)(rows, values).numpy()
    for r, c, y, x in np.ndindex(4, 3, 2, 5):
        assert np.isclose(
            got[r, c, y, x], rows[r, c, y, x].item() + values[r].item() * across[c].item(), atol=1e-6
        )


def test_write_sites_per_row_position():
    rows = torch.randn(3, 4, 2, 5)
    values = torch.tensor([0.0, 7.0, 9.0])  # flat positions y * 5 + x
    got = WriteSites((1, 3), (2.5, -1.0))(rows, values).numpy()
    want = rows.numpy().copy()
    for r in range(3):
        y, x = divmod(int(values[r]), 5)
        want[r, 1, y, x], want[r, 3, y, x] = 2.5, -1.0
    np.testing.assert_array_equal(got, want)


def test_add_level_vector_picks_each_rows_level():
    g = torch.Generator().manual_seed(1)
    rows, vectors = torch.randn(3, 2, 4, generator=g), torch.randn(5, 2, 4, generator=g)
    levels = torch.tensor([4.0, 0.0, 4.0])
    got = AddLevelVector(vectors, -1.5)(rows, levels).numpy()
    for r in range(3):
        np.testing.assert_allclose(got[r], rows[r].numpy() - 1.5 * vectors[int(levels[r])].numpy(), rtol=1e-6)
