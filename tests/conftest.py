import sys
from pathlib import Path

# Tests import the package from the checkout (also when run outside the virtualenv).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
