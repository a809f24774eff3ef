# zeus-source: examples/research_reproducibility/zeus_nsdi23/capriccio/README.md:26
# sha256: dc8ed6bd76afe9b17a38be7bf1f1f1dea1e566b77de3b1f3da5e2a36f4f4f7bc
# capriccio: tiny
# cwd: FOLDER
# check: Generating train split: .*64 examples
# ---
import datasets  # Huggingface datasets library

data_path = dict(train="9_train.json", validation="9_val.json")
raw_datasets = datasets.load_dataset("json", data_files=data_path)
