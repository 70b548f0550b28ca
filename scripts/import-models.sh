#!/bin/sh
# Regenerates the models imported from PyTorch (torchvision 0.14 with torch 1.13, Debian's python3-torchvision):
#   scripts/import-models.sh        (from the repository root; python/dpsim/import_torch.py does the work)
set -eu
py=${DPSIM_PYTHON:-/usr/bin/python3}
export PYTHONPATH="$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}"
imp() { "$py" -m dpsim.import_torch "$@"; }
imp torchvision.models:resnet101 --name ResNet-101 --input-shape 1,3,224,224 -o models/resnet-101.yaml
imp torchvision.models:resnext50_32x4d --name ResNeXt-50-32x4d --input-shape 1,3,224,224 -o models/resnext-50-32x4d.yaml
imp torchvision.models:resnext101_32x8d --name ResNeXt-101-32x8d --input-shape 1,3,224,224 \
  -o models/resnext-101-32x8d.yaml
imp torchvision.models:vit_b_16 --name ViT-B-16 --input-shape 1,3,224,224 -o models/vit-b-16.yaml
