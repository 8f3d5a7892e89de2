"""(placeholder: being written)"""

from fastapi import APIRouter

router = APIRouter(tags=["jobs"])
