"""checkpoint/formats"""
