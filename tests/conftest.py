import os, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# the test suite never reaches for the network: hub and downloads fail fast and clearly instead of hanging
os.environ.setdefault('HF_HUB_OFFLINE', '1')
os.environ.setdefault('HF_DATASETS_OFFLINE', '1')
os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
os.environ.setdefault('CAOPD_OFFLINE', '1')
# figures are written as HTML only: a PNG costs seconds of headless chromium and the tests read the data, not pixels
os.environ.setdefault('CAOPD_PNG', '0')
