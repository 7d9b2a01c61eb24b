// cli/vit.h — the ViT image classifier in `toy eval` and `toy infer` (cmd_vit.cpp): each command
// declares these flags and hands over when --images / --image is given.
#pragma once

#include "cli/cli.h"

namespace toy::cli {

std::vector<Flag> vit_eval_flags();   // --images, --n-images
std::vector<Flag> vit_infer_flags();  // --image, --images
// `toy train vit …` (the command train-vit), and `toy train --resume DIR` of a vit run: then `a`
// holds toy train's flags, of which only --resume, --stop-after and --threads may be given.
int train_vit(const Args& a);
// `toy eval VIT.gguf --images DIR`: accuracy and confusion matrix on the test split.
int eval_vit(const Args& a);
// `toy infer VIT.gguf --image FILE|INDEX`: the most likely classes of one image.
int infer_vit(const Args& a);

}  // namespace toy::cli
