#version 450
// The image layer: RGBA8 texture, straight alpha blended over the background.
layout(set = 0, binding = 0) uniform sampler2D image;

layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;

void main() {
    color = texture(image, uv);
}
