#pragma once
// Opens a line dataset from a spec string (CLI --data, training configs, the GUI):
//   PATH.json                        a Wireframe/YorkUrban JSON file (core/data/wireframe.h)
//   DIR                              DIR/train.json (the training split of a dataset folder)
//   procedural:COUNT[:SEED[:WxH[:SCENES]]]
//                                    the built-in generator (defaults: seed 0, 256x256, rooms;
//                                    SCENES: rooms, facades or mixed, core/data/procedural.h)
//   lsd:FOLDER | lsd:LIST.txt        photos labelled by LSD's long segments (core/data/photo_lines.h)
//   mlsd:LIST.txt | mlsd:FOLDER      photos labelled by M-LSD tiny, cached beside the list
//   mlsd-snapped:LIST | ...:FOLDER   the same with each label snapped onto its image edge
//                                    (core/data/mlsd_lines.h; model: setMlsdLabelCheckpoint)
//   mix:SPEC+SPEC[+SPEC...]          the parts interleaved, sample i from part i % K
// Throws glimpse::Error naming the spec on anything else.
#include <memory>
#include <string>

#include "core/data/lines.h"

namespace glimpse::data {

std::unique_ptr<LineDataset> openLineDataset(const std::string& spec);

} // namespace glimpse::data
