# Copyright 2026 The ik_node Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.


"""Choice of implementation: the numpy reference or its compiled (numba) twins."""

import importlib
from types import ModuleType
from typing import Optional, Tuple

from ik_node.core.errors import InvalidInputError

BACKENDS = ('auto', 'numpy', 'numba')


def load_compiled(backend: str, *modules: str) -> Tuple[Optional[ModuleType], ...]:
    """Import the compiled modules ``ik_node.core.<name>`` that ``backend`` asks for.

    Returns:
        One module per name, or Nones for 'numpy' and for 'auto' without numba.

    Raises:
        InvalidInputError: an unknown backend, or 'numba' when numba is missing.

    """
    if backend not in BACKENDS:
        raise InvalidInputError(f'backend: expected one of {", ".join(BACKENDS)}, '
                                f'received {backend!r}')
    if backend == 'numpy':
        return (None,) * len(modules)
    try:
        return tuple(importlib.import_module(f'ik_node.core.{name}') for name in modules)
    except ImportError as exc:
        if backend == 'numba':
            raise InvalidInputError(f"backend 'numba' needs numba, which cannot be imported "
                                    f'({exc})') from None
        return (None,) * len(modules)


def compiled_status() -> Tuple[str, str]:
    """Return ('numba', '') when the compiled twins load, else ('numpy', the reason).

    What ``backend='auto'`` picks: the node logs it once at start-up.
    """
    try:
        importlib.import_module('ik_node.core.kernels.lm')
    except ImportError as exc:
        return 'numpy', f'numba cannot be imported: {exc}'
    return 'numba', ''
