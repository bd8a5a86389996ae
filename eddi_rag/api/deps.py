"""What every router takes from the app: the Runtime."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from eddi_rag.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
