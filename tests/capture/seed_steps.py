"""The two seed training loops, written for `simulator capture`: FUNCTION(device) -> step."""

import torch
import torch.nn as nn
import torch.optim as optim


class Transformer(nn.Module):
    def __init__(self, vocab_size, d_model, nhead, num_encoder_layers, num_decoder_layers,
                 device=None):
        super().__init__()
        self.transformer = nn.Transformer(d_model, nhead, num_encoder_layers,
                                          num_decoder_layers, device=device)
        self.embedding = nn.Embedding(vocab_size, d_model, device=device)
        self.fc = nn.Linear(d_model, vocab_size, device=device)

    def forward(self, src, tgt):
        src = self.embedding(src)
        tgt = self.embedding(tgt)
        return self.fc(self.transformer(src, tgt))


def transformer_step(device):
    model = Transformer(10000, 512, 8, 6, 6, device=device)
    optimizer = optim.Adam(model.parameters(), lr=0.001)
    criterion = nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad()
        output = model(torch.randint(0, 10000, (32, 10), device=device),
                       torch.randint(0, 10000, (32, 10), device=device))
        loss = criterion(output.view(-1, 10000),
                         torch.randint(0, 10000, (32, 10), device=device).view(-1))
        loss.backward()
        optimizer.step()

    return step


class CNN(nn.Module):
    def __init__(self, device=None):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5, device=device)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(20, 50, 5, device=device)
        self.fc1 = nn.Linear(4 * 4 * 50, 500, device=device)
        self.fc2 = nn.Linear(500, 10, device=device)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = x.view(-1, 4 * 4 * 50)
        x = torch.relu(self.fc1(x))
        return self.fc2(x)


def cnn_step(device):
    model = CNN(device=device)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=0.001)

    def step():
        inputs = torch.randn(64, 1, 28, 28, device=device)
        labels = torch.randint(0, 10, (64,), device=device)
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()

    return step
